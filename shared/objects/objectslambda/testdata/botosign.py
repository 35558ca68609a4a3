"""Sends HTTP requests signed by botocore (SigV4, service execute-api).

One JSON request a line on stdin: {"method","url","headers":{name:value},
"body":base64}; one JSON answer a line on stdout: {"status","headers":
{name:[values]},"body":base64} or {"error"}. Credentials and region come
from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and
AWS_REGION. The URL is sent as it is written: http.client neither decodes
nor normalizes it.
"""

import base64
import http.client
import json
import os
import sys
import urllib.parse

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def main():
    creds = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                        os.environ.get("AWS_SESSION_TOKEN") or None)
    signer = SigV4Auth(creds, "execute-api", os.environ["AWS_REGION"])
    conns = {}
    for line in sys.stdin:
        r = json.loads(line)
        try:
            out = send(signer, conns, r)
        except Exception as e:  # reported to the Go side, which fails the call
            conns.clear()
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def send(signer, conns, r):
    body = base64.b64decode(r.get("body") or "")
    req = AWSRequest(method=r["method"], url=r["url"], data=body, headers=r["headers"])
    signer.add_auth(req)
    u = urllib.parse.urlsplit(r["url"])
    target = u.path + ("?" + u.query if u.query else "")
    conn = conns.get(u.netloc)
    if conn is None:
        conn = conns[u.netloc] = http.client.HTTPConnection(u.netloc, timeout=120)
    headers = {k: v for k, v in req.headers.items()}
    conn.request(r["method"], target, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    hdrs = {}
    for k, v in resp.getheaders():
        hdrs.setdefault(k, []).append(v)
    return {"status": resp.status, "headers": hdrs, "body": base64.b64encode(data).decode()}


if __name__ == "__main__":
    main()
