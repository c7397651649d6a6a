"""Conditional writes on S3: create an object only if it is absent, replace it only if unchanged.

pyarrow's S3 filesystem, which writes every data file, has no way to send ``If-None-Match``
or ``If-Match`` with a PUT. Without them, "read the lease, see nobody holds it, write ours" is
two steps, and two writers started in the same instant both win; and a manifest PUT replaces
whatever another writer committed under the same batch number. S3 (since 2024), MinIO and
moto's server honour both headers on PutObject: ``If-None-Match: *`` fails with 412 when the
key exists, ``If-Match: <etag>`` when the object changed since it was read. So the few small
objects whose writes must not race (the writer's and the compactor's lease, manifests and
compaction records) go through botocore with those headers; everything else stays on pyarrow.

A store that ignores the headers would let both PUTs through. ``ConditionalS3.probe`` tells:
it creates a probe object twice; a store that accepts the second create does not support them,
and the landing zone says so at start (``storage.ObjectStore.check_conditional``).

boto3 is imported only when an ``s3://`` landing zone is opened. Credentials, region and
endpoint come from ``sink.object_store`` when set, else from the AWS SDK's usual chain
(environment, shared profile, instance or pod role), as for pyarrow. No secret is ever shown:
errors carry the S3 error code and message only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConditionalS3", "PreconditionFailed"]


class PreconditionFailed(FileExistsError):
    """The object exists (create) or changed since it was read (replace)."""


class ConditionalS3:
    """Conditional PUTs and tagged GETs of keys under ``bucket`` (botocore's client)."""

    def __init__(
        self,
        bucket: str,
        *,
        endpoint: str | None,
        region: str | None,
        access_key: str | None,
        secret_key: str | None,
        session_token: str | None,
    ) -> None:
        import boto3  # noqa: PLC0415 - only for s3:// landing zones (a slow import)
        from botocore.config import Config  # noqa: PLC0415

        self.bucket = bucket
        options: dict[str, Any] = {}
        if endpoint:
            options["endpoint_url"] = endpoint
        if region:
            options["region_name"] = region
        if access_key and secret_key:
            options["aws_access_key_id"] = access_key
            options["aws_secret_access_key"] = secret_key
            if session_token:
                options["aws_session_token"] = session_token
        addressing = "path" if endpoint else "auto"  # S3-compatible servers: path style
        self._client = boto3.session.Session().client(
            "s3",
            config=Config(s3={"addressing_style": addressing}, retries={"mode": "standard"}),
            **options,
        )

    def create(self, key: str, data: bytes) -> str:
        """PUT ``key`` only if no object is there; returns its ETag. ``PreconditionFailed``
        when one is (and it is not this very write: ``_ours``)."""
        try:
            return self._put(key, data, IfNoneMatch="*")
        except PreconditionFailed:
            return self._ours(key, data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        """PUT ``key`` only if it is still the object ``etag`` names; returns the new ETag.
        ``PreconditionFailed`` when it changed or is gone (and not to this very write)."""
        try:
            return self._put(key, data, IfMatch=etag)
        except PreconditionFailed:
            return self._ours(key, data)

    def _ours(self, key: str, data: bytes) -> str:
        """A conditional PUT refused: botocore retries a PUT whose reply was lost, and the
        retry finds the object the first attempt stored. It is this write when the stored
        bytes are the bytes sent (leases name their owner and expiry, commit records their
        time: another writer's never equal them); returns its ETag."""
        try:
            found, etag = self.read(key)
        except FileNotFoundError:
            found, etag = b"", ""
        if found == data:
            return etag
        raise PreconditionFailed(f"{key}: written by another process meanwhile")

    def read(self, key: str) -> tuple[bytes, str]:
        """The object and its ETag (``FileNotFoundError`` when there is none)."""
        try:
            found = self._client.get_object(Bucket=self.bucket, Key=key)
            return bytes(found["Body"].read()), str(found["ETag"])
        except Exception as exc:
            raise _os_error(exc, key) from None

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise _os_error(exc, key) from None

    def probe(self, key: str) -> bool:
        """Whether the store honours ``If-None-Match``: two creates of ``key`` (a name of
        this process's own, so that processes starting together do not probe one object),
        with other bytes; the second must fail. The probe object is removed again."""
        try:
            self.create(key, b"conditional write probe 1\n")
            try:
                self.create(key, b"conditional write probe 2\n")
            except PreconditionFailed:
                return True
            return False
        finally:
            self.delete(key)

    def _put(self, key: str, data: bytes, **condition: str) -> str:
        try:
            done = self._client.put_object(Bucket=self.bucket, Key=key, Body=data, **condition)
        except Exception as exc:
            raise _os_error(exc, key) from None
        return str(done["ETag"])


def _os_error(exc: Exception, key: str) -> OSError:
    """botocore's error as the ``OSError`` the stores raise (no request ids, no secrets)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return OSError(f"{key}: {type(exc).__name__}: {exc}")
    error = response.get("Error", {})
    code = str(error.get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    message = f"{key}: {code or status} {error.get('Message', '')}".rstrip()
    if (
        status == 412
        or code in ("PreconditionFailed", "ConditionalRequestConflict")
        or (status == 409 and code == "ConditionalRequestConflict")
    ):
        return PreconditionFailed(message)
    if status == 404 or code in ("NoSuchKey", "404", "NotFound"):
        return FileNotFoundError(message)
    return OSError(message)
