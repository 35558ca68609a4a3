"""Print template.yaml as CloudFormation after the SAM transform (JSON).

The transform is aws-sam-translator's, the one cfn-lint ships with and
`sam deploy` runs server-side; a fake region and account stand in, since the
output only needs them to build ARNs.

    python tools/cfncheck/transform.py template.yaml > build/transformed.json
"""
import json
import os
import sys

import boto3
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.parser.parser import Parser
from samtranslator.public.translator import ManagedPolicyLoader
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies(ManagedPolicyLoader):
    """The template names no AWS managed policy by name; nothing to look up."""

    def __init__(self):
        pass

    def load(self):
        return {}


def main(path):
    with open(path) as f:
        doc = yaml_parse(f.read())
    # What `sam package` does: each function's code is an S3 object.
    for res in doc.get("Resources", {}).values():
        if res.get("Type") == "AWS::Serverless::Function":
            res.setdefault("Properties", {})["CodeUri"] = "s3://ddbpipe-artifacts/code.zip"
    doc.get("Globals", {}).get("Function", {}).pop("CodeUri", None)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    boto3.setup_default_session(region_name=os.environ["AWS_DEFAULT_REGION"])
    try:
        out = transform(doc, {}, NoManagedPolicies())
    except InvalidDocumentException as e:
        for cause in e.causes:
            print(cause.message, file=sys.stderr)
        sys.exit(1)
    json.dump(out, sys.stdout, indent=1, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "template.yaml")
