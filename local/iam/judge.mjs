// The local stack's IAM judge: a small HTTP server on 127.0.0.1 that
// evaluates calls with @cloud-copilot/iam-simulate (AGPL-3.0, run here as a
// separate process, never linked into ddbpipe's binaries).
//
//   node judge.mjs            prints "listening <port>" once ready
//   PUT    /policies/SET      {identities: {name: {principal, policies: [{name, policy}]}},
//                              resources: {key: policy}}   replaces SET's policies
//   DELETE /policies/SET      forgets SET
//   POST   /judge/SET         {calls: [{identity, action, resource, resourcePolicy, context}]}
//                           → {results: [{decision, error?}]}
//
// A set is one stack's policies: the judge `ddbpipe local servers` starts
// serves every stack of its run, each under a set of its own (a stack's
// own judge uses one). decision is "Allowed", "ExplicitlyDenied" or
// "ImplicitlyDenied"; a call the simulator cannot evaluate (unknown
// action, a resource of the wrong type for the action, an unknown set)
// comes back as "Error" with the reason.
import http from "node:http";
import { runSimulation } from "@cloud-copilot/iam-simulate";

// sets: name → {identities, resources}
const sets = new Map();

function read(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      try {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve(text === "" ? {} : JSON.parse(text));
      } catch (e) {
        reject(e);
      }
    });
    req.on("error", reject);
  });
}

async function judge(set, call) {
  const id = set.identities[call.identity];
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
  if (call.resourcePolicy && set.resources[call.resourcePolicy]) {
    sim.resourcePolicy = set.resources[call.resourcePolicy];
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
    const [, route, name] = req.url.match(/^\/(policies|judge)\/([^/?]+)$/) || [];
    if (route === "policies" && req.method === "PUT") {
      sets.set(name, { identities: body.identities || {}, resources: body.resources || {} });
      res.writeHead(204).end();
      return;
    }
    if (route === "policies" && req.method === "DELETE") {
      sets.delete(name);
      res.writeHead(204).end();
      return;
    }
    if (route === "judge" && req.method === "POST") {
      const set = sets.get(name);
      const results = [];
      for (const call of body.calls || []) {
        results.push(set ? await judge(set, call) : { decision: "Error", error: `unknown policy set ${name}` });
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
