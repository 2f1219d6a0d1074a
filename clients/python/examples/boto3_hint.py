#!/usr/bin/env python3
"""boto3_hint.py - send one prefetch hint with nothing but boto3 (no helper):
boto3's session supplies the credentials, botocore's S3 signer signs the
request (SigV4 with x-amz-content-sha256 of the body), the standard library
sends it. Prints the gateway's answer, e.g.

  202 {"job": "3905aec0ad34a25b", "bucket": "datasets", "objects": 20, "state": "queued"}

  python3 boto3_hint.py http://gateway:9000 datasets '{"template": "train/shard-{000000..000019}.tar"}'
"""

import sys
import urllib.error
import urllib.request

import boto3
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest


def send_hint(endpoint, bucket, body, region="us-east-1"):
    """POST /{bucket}?prefetch with a JSON body; returns (status, answer text)."""
    creds = boto3.Session().get_credentials()
    req = AWSRequest(method="POST", url="%s/%s?prefetch" % (endpoint.rstrip("/"), bucket),
                     data=body.encode(), headers={"Content-Type": "application/json"})
    S3SigV4Auth(creds, "s3", region).add_auth(req)
    http = urllib.request.Request(req.url, data=req.body, headers=dict(req.headers.items()),
                                  method="POST")
    try:
        with urllib.request.urlopen(http, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:     # an S3 <Error> document: Code, Message
        return e.code, e.read().decode()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: boto3_hint.py ENDPOINT BUCKET JSON")
    status, text = send_hint(*sys.argv[1:])
    print(status, text)
    sys.exit(0 if status == 202 else 1)
