// Starts fauxqs (SQS) on 127.0.0.1:<port>, with queue URLs on that address.
//
// fauxqs's startFauxqs binds 0.0.0.0 and names queues
// http://sqs.<region>.localhost:<port>/..., a host that does not resolve
// everywhere. So this builds the app with fauxqs's own buildApp, giving it an
// SQS store whose URL host is unset: queue URLs then use the request's Host
// header (127.0.0.1:<port>), and it listens where we say.
//
// Usage: node fauxqs-launch.mjs <port>   (from the directory holding node_modules)
import { buildApp } from "fauxqs";

// Not exported by the package; pinned by package-lock.json.
const { SqsStore } = await import(new URL("./node_modules/fauxqs/dist/sqs/sqsStore.js", import.meta.url));

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error("usage: node fauxqs-launch.mjs <port>");
  process.exit(2);
}

const sqsStore = new SqsStore();
sqsStore.host = undefined;
const app = buildApp({ logger: false, stores: { sqsStore } });
await app.listen({ port, host: "127.0.0.1" });
