"""Create the SAM-transformed template as a CloudFormation stack on moto.

    python tools/cfncheck/motodeploy.py build/transformed.json

Starts moto_server on 127.0.0.1 on a free port, uploads a stand-in code
package where the transform points the functions (s3://ddbpipe-artifacts/
code.zip), creates the stack with the parameters' defaults, and fails unless
the stack and every resource in it reach CREATE_COMPLETE. moto checks
references, attribute names and each resource type's required properties; it
does not enforce IAM or every service's validation (see docs/deploying.md,
"Proof before a deploy", for what only a real deploy proves).

moto keeps an element of a list whose Fn::If gives AWS::NoValue (a policy
statement granted only with a parameter set), where CloudFormation drops it:
such elements are resolved here first, with the parameters' defaults.

moto accepts a resource type it does not model (Glue, Athena, OpenSearch
domains, alarms, ...) but cannot read an attribute of one: a Fn::GetAtt of
it, or a ${Id.Attr} in a Fn::Sub, fails the create. Those references become
a stand-in string first ("moto-stand-in-Id-Attr"), as a Ref of such a
resource already gives its logical id.
"""
import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import zipfile

import boto3
from botocore.config import Config

REGION = "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def condition(tpl, expr):
    """Evaluates a condition expression with the parameters' defaults."""
    if isinstance(expr, dict) and len(expr) == 1:
        (fn, arg), = expr.items()
        if fn == "Condition":
            return condition(tpl, tpl["Conditions"][arg])
        if fn == "Fn::Not":
            return not condition(tpl, arg[0])
        if fn == "Fn::And":
            return all(condition(tpl, a) for a in arg)
        if fn == "Fn::Or":
            return any(condition(tpl, a) for a in arg)
        if fn == "Fn::Equals":
            return value(tpl, arg[0]) == value(tpl, arg[1])
    raise ValueError(f"condition {expr!r}: not evaluated here")


def value(tpl, v):
    if isinstance(v, dict) and list(v) == ["Ref"]:
        return str(tpl["Parameters"][v["Ref"]].get("Default", ""))
    return str(v)


def drop_novalue(tpl, v):
    """Resolves list elements {"Fn::If": [cond, x, {"Ref": "AWS::NoValue"}]}."""
    if isinstance(v, list):
        out = []
        for e in v:
            if isinstance(e, dict) and list(e) == ["Fn::If"] and {"Ref": "AWS::NoValue"} in e["Fn::If"][1:]:
                cond, yes, no = e["Fn::If"]
                e = yes if condition(tpl, tpl["Conditions"][cond]) else no
                if e == {"Ref": "AWS::NoValue"}:
                    continue
            out.append(drop_novalue(tpl, e))
        return out
    if isinstance(v, dict):
        return {k: drop_novalue(tpl, x) for k, x in v.items()}
    return v


SUB_ATTR = re.compile(r"\$\{([A-Za-z0-9]+)\.([A-Za-z0-9.]+)\}")


def stand_in_attributes(tpl, v):
    """Replaces a Fn::GetAtt (or ${Id.Attr} in a Fn::Sub) of a resource whose
    type moto does not model by a stand-in string."""
    from moto.cloudformation.parsing import resource_class_from_type
    logging.getLogger("moto").setLevel(logging.ERROR)  # "No Moto CloudFormation support for ..."
    unmodelled = {k for k, r in tpl["Resources"].items() if resource_class_from_type(r["Type"]) is None}

    def walk(v):
        if isinstance(v, list):
            return [walk(e) for e in v]
        if not isinstance(v, dict):
            return v
        if list(v) == ["Fn::GetAtt"]:
            ref = v["Fn::GetAtt"]
            res, attr = ref.split(".", 1) if isinstance(ref, str) else ref
            if res in unmodelled:
                return f"moto-stand-in-{res}-{attr}"
        if list(v) == ["Fn::Sub"]:
            arg = v["Fn::Sub"]
            text = arg if isinstance(arg, str) else arg[0]
            text = SUB_ATTR.sub(lambda m: f"moto-stand-in-{m[1]}-{m[2]}" if m[1] in unmodelled else m[0], text)
            return {"Fn::Sub": text if isinstance(arg, str) else [text, walk(arg[1])]}
        return {k: walk(x) for k, x in v.items()}

    return walk(v)


def main(path):
    with open(path) as f:
        tpl = json.load(f)
    tpl["Resources"] = drop_novalue(tpl, tpl["Resources"])
    tpl["Resources"] = stand_in_attributes(tpl, tpl["Resources"])
    tpl["Outputs"] = stand_in_attributes(tpl, tpl.get("Outputs", {}))
    body = json.dumps(tpl)
    port = free_port()
    env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION=REGION)
    server = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    sys.exit(f"moto_server did not start on {url}: {server.stderr.read().decode() if server.poll() is not None else 'timeout'}")
                time.sleep(0.2)
        kw = dict(endpoint_url=url, region_name=REGION, aws_access_key_id="testing",
                  aws_secret_access_key="testing", config=Config(retries={"max_attempts": 2}))
        s3 = boto3.client("s3", **kw)
        s3.create_bucket(Bucket="ddbpipe-artifacts")
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("bootstrap", "#!/bin/sh\n")
        s3.put_object(Bucket="ddbpipe-artifacts", Key="code.zip", Body=buf.getvalue())

        cf = boto3.client("cloudformation", **kw)
        cf.create_stack(StackName="ddbpipe", TemplateBody=body,
                        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"])
        deadline = time.time() + 300
        while True:
            stack = cf.describe_stacks(StackName="ddbpipe")["Stacks"][0]
            if not stack["StackStatus"].endswith("_IN_PROGRESS"):
                break
            if time.time() > deadline:
                sys.exit("moto: stack still in progress after 300 s")
            time.sleep(1)
        resources = []
        token = None
        while True:
            page = cf.list_stack_resources(StackName="ddbpipe", **({"NextToken": token} if token else {}))
            resources += page["StackResourceSummaries"]
            token = page.get("NextToken")
            if not token:
                break
        every = json.loads(body)["Resources"]
        # The resources the defaults create: those without a condition, and
        # those whose condition holds (SearchEnabled's default is "true").
        want = {k: v for k, v in every.items()
                if "Condition" not in v or condition(tpl, tpl["Conditions"][v["Condition"]])}
        conditional = len(every) - len(want)  # listed without an id when their condition is false
        bad = [f"{r['LogicalResourceId']} ({r['ResourceType']}): {r['ResourceStatus']} {r.get('ResourceStatusReason', '')}"
               for r in resources if r["ResourceStatus"] != "CREATE_COMPLETE"]
        # moto accepts resource types it does not model (Glue, Athena,
        # CloudWatch alarms and dashboards, ...) and lists them without a
        # logical id: their number must make up exactly the rest.
        named = {r["LogicalResourceId"] for r in resources if r["LogicalResourceId"]}
        unnamed = sum(1 for r in resources if not r["LogicalResourceId"])
        rest = sorted(set(want) - named)
        for line in bad:
            print("not created:", line)
        types = sorted({want[k]["Type"] for k in rest})
        print(f"moto deploy: stack {stack['StackStatus']}; {len(named)} resources created and CREATE_COMPLETE, "
              f"{unnamed} more accepted without a moto model ({', '.join(types)}); {len(want)} in the template")
        ok = len(rest) <= unnamed <= len(rest) + conditional
        if not ok:
            print(f"{len(rest)} template resources not among the created ones ({', '.join(rest)}), "
                  f"but moto lists {unnamed} resources without a model")
        if stack["StackStatus"] != "CREATE_COMPLETE" or bad or not ok or named - set(want):
            if stack.get("StackStatusReason"):
                print("reason:", stack["StackStatusReason"])
            sys.exit(1)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/transformed.json")
