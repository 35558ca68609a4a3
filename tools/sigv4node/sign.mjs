// Signs requests with @smithy/signature-v4, the AWS SDK for JavaScript
// v3's SigV4 signer, for local/httpapi's signer tests.
//
// Usage: node sign.mjs HOST REGION ACCESS_KEY SECRET < requests.jsonl
//
// Each input line is {method, url (path and query as a user writes them),
// body (base64), headers ([[name, value], ...])}; each output line is
// {target (the request target to send), headers (what to send with it)}.
// The URL is parsed as Node parses one (new URL); the query is signed as
// the SDK signs it (a map of decoded values) and sent as the SDK's HTTP
// handler sends it (each name and value encoded, repeated names repeated).
import { createInterface } from "node:readline";
import { Hash } from "@smithy/hash-node";
import { SignatureV4 } from "@smithy/signature-v4";

const [host, region, accessKeyId, secretAccessKey] = process.argv.slice(2);
const signer = new SignatureV4({
  service: "execute-api",
  region,
  credentials: { accessKeyId, secretAccessKey },
  sha256: Hash.bind(null, "sha256"),
});
const [hostname, port] = host.split(":");
const escape = (s) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());

const out = [];
for await (const line of createInterface({ input: process.stdin })) {
  if (!line) continue;
  const req = JSON.parse(line);
  const url = new URL(req.url, `http://${host}`);
  const query = {};
  for (const [k, v] of url.searchParams) {
    query[k] = Object.hasOwn(query, k) ? [].concat(query[k], v) : v;
  }
  const headers = { host };
  for (const [k, v] of req.headers ?? []) headers[k.toLowerCase()] = v;
  const signed = await signer.sign({
    method: req.method,
    protocol: "http:",
    hostname,
    port: Number(port),
    path: url.pathname,
    query,
    headers,
    body: Buffer.from(req.body, "base64"),
  });
  const qs = Object.entries(query)
    .flatMap(([k, v]) => [].concat(v).map((x) => `${escape(k)}=${escape(x)}`))
    .join("&");
  out.push(JSON.stringify({ target: url.pathname + (qs ? "?" + qs : ""), headers: Object.entries(signed.headers) }));
}
process.stdout.write(out.join("\n") + "\n");
