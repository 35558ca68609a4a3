"""Signs requests with botocore's SigV4Auth, for local/httpapi's signer tests.

Usage: sign_botocore.py HOST REGION ACCESS_KEY SECRET MODE < requests.jsonl

Each input line is {"method", "url" (path and query as a user writes them),
"body" (base64), "headers" ([[name, value], ...])}; each output line is
{"target" (the request target to send), "headers" (what to send with it,
Host aside)}.

MODE "params" signs as botocore's own clients do: the query goes to the
request's params (decoded as a form decodes it) and is sent encoded as
AWSRequest.prepare encodes params. MODE "url" hands botocore the query as
written, which it signs as it is (SigV4Auth assumes such a query is
already in canonical form).
"""

import base64
import json
import sys
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

# What requests and urllib3 leave unencoded in a path they send: a space or
# UTF-8 written in a URL is percent-encoded, existing escapes are kept.
PATH_SAFE = "!$%&'()*+,/:;=@~"


def main():
    host, region, key, secret, mode = sys.argv[1:6]
    auth = SigV4Auth(Credentials(key, secret), "execute-api", region)
    out = []
    for line in sys.stdin:
        req = json.loads(line)
        parts = urlsplit(req["url"])
        path = quote(parts.path, safe=PATH_SAFE)
        headers = dict(req.get("headers") or [])
        body = base64.b64decode(req["body"])
        if mode == "params":
            params = parse_qsl(parts.query, keep_blank_values=True)
            target = path + ("?" + urlencode(params) if params else "")
            aws = AWSRequest(method=req["method"], url="http://" + host + path,
                             params=params, data=body, headers=headers)
        else:
            target = path + ("?" + parts.query if parts.query else "")
            aws = AWSRequest(method=req["method"], url="http://" + host + target,
                             data=body, headers=headers)
        auth.add_auth(aws)
        out.append(json.dumps({"target": target, "headers": list(aws.headers.items())}))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
