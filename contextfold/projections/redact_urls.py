"""Credentials in a media URL, replaced for the manifest: the URL stays a valid URL.

Pure. Why its own function: an image or document given by URL was recorded in the manifest's
``media[].ref`` as written (its first 80 characters), so ``https://bob:PASSWORD@host/a.png``, a
``?token=ghp_...`` or a presigned URL's ``X-Amz-Credential`` went into every ContextBuilt record,
which the README says records "never the secret". The secret rules (``projections.redact``)
would put ``[REDACTED:rule]`` in the URL, which is no URL character, and a ref cut at 80
characters can hold a secret's head that no rule recognises any longer: so the credentials are
found by their place in the URL, before the cut, and replaced with ``REDACTED`` (unreserved
characters: valid in user info, a query value and a fragment alike).

What is replaced: the password of the user info (a user name that is itself a secret, as in
``https://ghp_...@github.com``, goes whole), and the value of every query or fragment parameter
whose name says credential (:data:`SECRET_PARAMETERS`, and any name containing one of
:data:`SECRET_NAME_PARTS`) or whose value holds a secret by the default rules. Everything else
is kept byte for byte, escapes included.
"""

from __future__ import annotations

from urllib.parse import unquote

from contextfold.projections.redact import find_secrets

__all__ = ["REDACTED_IN_URL", "SECRET_NAME_PARTS", "SECRET_PARAMETERS", "shown_url"]

REDACTED_IN_URL = "REDACTED"

SECRET_PARAMETERS: frozenset[str] = frozenset({
    "key", "sig", "code", "x-amz-credential", "x-amz-signature", "x-amz-security-token",
    "x-goog-credential", "x-goog-signature", "awsaccesskeyid",
})
"""Query parameter names (lower case) that carry a credential or a presigned URL's signature
(S3 ``X-Amz-*``, GCS ``X-Goog-*``, legacy S3 ``AWSAccessKeyId``/``Signature``, an Azure SAS
``sig``, a Google API ``key``, an OAuth ``code``), matched whole."""

SECRET_NAME_PARTS = ("token", "secret", "passw", "signature", "credential", "apikey", "api_key", "api-key",
                     "access_key", "auth")
"""Parts of a parameter name (lower case) that say its value is a credential."""


def _secret_parameter(name: str, value: str) -> bool:
    lowered = unquote(name).lower()
    return (lowered in SECRET_PARAMETERS or any(part in lowered for part in SECRET_NAME_PARTS)
            or bool(find_secrets(unquote(value))))


def _shown_parameters(text: str) -> str:
    """``a=1&token=x`` with each credential value replaced (names and separators kept)."""
    out: list[str] = []
    for pair in text.split("&"):
        name, eq, value = pair.partition("=")
        if eq and value and _secret_parameter(name, value):
            pair = f"{name}={REDACTED_IN_URL}"
        elif not eq and find_secrets(unquote(name)):  # a bare value that is a secret
            pair = REDACTED_IN_URL
        out.append(pair)
    return "&".join(out)


def shown_url(url: str) -> str:
    """``url`` with its credentials replaced (module docstring); a URL with no authority
    (``data:``) comes back as it is."""
    scheme_end = url.find("://")
    if scheme_end < 0:
        return url
    start = scheme_end + 3
    authority_end = next((i for i, c in enumerate(url[start:], start) if c in "/?#"), len(url))
    authority = url[start:authority_end]
    at = authority.rfind("@")
    if at >= 0:
        user, colon, _ = authority[:at].partition(":")
        if find_secrets(unquote(user)):
            user = REDACTED_IN_URL
        authority = f"{user}{':' + REDACTED_IN_URL if colon else ''}{authority[at:]}"
    rest = url[authority_end:]
    path, hash_mark, fragment = rest.partition("#")
    path, question, query = path.partition("?")
    if query:
        query = _shown_parameters(query)
    if fragment:
        fragment = _shown_parameters(fragment)
    return f"{url[:start]}{authority}{path}{question}{query}{hash_mark}{fragment}"
