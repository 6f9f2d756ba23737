"""Verifies a signed answer of the API with PyPI's http-message-signatures.

Reads on stdin a JSON capture: {"keys": <JWK Set>, "status", "headers": [[name,
value], ...], "body": <base64>, "request": {"method", "url", "headers"},
"label", "tag"}. Prints {"verified": [...]} and exits 0, or prints
{"error": ...} and exits 1.
"""

import base64
import json
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from http_message_signatures import HTTPMessageVerifier, InvalidSignature, MappingKeyResolver, algorithms


class Headers:
    def __init__(self, pairs):
        self.pairs = [(name, value) for name, value in pairs]

    def items(self):
        return list(self.pairs)

    def __contains__(self, name):
        return any(n.lower() == name.lower() for n, _ in self.pairs)


class Request:
    def __init__(self, capture):
        self.method = capture["method"]
        self.url = capture["url"]
        self.headers = Headers(capture["headers"])


class Response:
    def __init__(self, capture):
        self.status_code = capture["status"]
        self.headers = Headers(capture["headers"])
        self.request = Request(capture["request"])


def public_keys(jwks):
    keys = {}
    for jwk in jwks["keys"]:
        assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519", jwk
        x = base64.urlsafe_b64decode(jwk["x"] + "=" * (-len(jwk["x"]) % 4))
        keys[jwk["kid"]] = Ed25519PublicKey.from_public_bytes(x)
    return keys


def main():
    capture = json.load(sys.stdin)
    verifier = HTTPMessageVerifier(
        signature_algorithm=algorithms.ED25519,
        key_resolver=MappingKeyResolver(public_keys=public_keys(capture["keys"]), private_keys={}),
    )
    verifier.allow_label_only_selection = capture.get("tag") is None
    body = base64.b64decode(capture["body"])
    try:
        results = verifier.verify(
            Response(capture),
            max_age=None,
            expect_label=capture.get("label"),
            expect_tag=capture.get("tag"),
            require_components=["@status", "content-digest", "content-type"],
            body=body,
        )
    except InvalidSignature as e:
        print(json.dumps({"error": f"invalid signature: {e}"}))
        return 1
    print(json.dumps({"verified": [
        {
            "label": r.label,
            "keyid": r.parameters.get("keyid"),
            "covered": list(r.covered_components),
            "parameters": {k: v for k, v in r.parameters.items()},
        }
        for r in results
    ]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
