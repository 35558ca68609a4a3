// The local stack's IAM judge: a small HTTP server on 127.0.0.1 that
// evaluates calls with @cloud-copilot/iam-simulate (AGPL-3.0, run here as a
// separate process, never linked into ddbpipe's binaries).
//
//   node judge.mjs            prints "listening <port>" once ready
//   PUT  /policies            {identities: {name: {principal, policies: [{name, policy}]}},
//                              resources: {key: policy}}   replaces every policy
//   POST /judge               {calls: [{identity, action, resource, resourcePolicy, context}]}
//                           → {results: [{decision, error?}]}
//
// decision is "Allowed", "ExplicitlyDenied" or "ImplicitlyDenied"; a call
// the simulator cannot evaluate (unknown action, a resource of the wrong
// type for the action) comes back as "Error" with the reason.
import http from "node:http";
import { runSimulation } from "@cloud-copilot/iam-simulate";

let identities = {};
let resources = {};

function read(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch (e) {
        reject(e);
      }
    });
    req.on("error", reject);
  });
}

async function judge(call) {
  const id = identities[call.identity];
  if (!id) {
    return { decision: "Error", error: `unknown identity ${call.identity}` };
  }
  const sim = {
    identityPolicies: id.policies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    request: {
      action: call.action,
      principal: id.principal,
      resource: { resource: call.resource, accountId: call.accountId },
      contextVariables: call.context || {},
    },
  };
  if (call.resourcePolicy && resources[call.resourcePolicy]) {
    sim.resourcePolicy = resources[call.resourcePolicy];
  }
  const res = await runSimulation(sim, {});
  if (res.resultType === "error") {
    return { decision: "Error", error: JSON.stringify(res.errors) };
  }
  return { decision: res.overallResult };
}

const server = http.createServer(async (req, res) => {
  try {
    const body = await read(req);
    if (req.method === "PUT" && req.url === "/policies") {
      identities = body.identities || {};
      resources = body.resources || {};
      res.writeHead(204).end();
      return;
    }
    if (req.method === "POST" && req.url === "/judge") {
      const results = [];
      for (const call of body.calls || []) {
        results.push(await judge(call));
      }
      const out = JSON.stringify({ results });
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(out) }).end(out);
      return;
    }
    res.writeHead(404).end();
  } catch (e) {
    res.writeHead(500, { "Content-Type": "text/plain" }).end(String(e && e.stack ? e.stack : e));
  }
});
server.keepAliveTimeout = 600000;
server.listen(0, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
// The Go side holds stdin open; when it goes away, so does the judge.
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
