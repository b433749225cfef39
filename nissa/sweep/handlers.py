"""A run's side of a sweep's steering, at step boundaries: ``hparams`` (new values for ``run.config``, handed to
``on_hparams``), ``restore`` (another run's shared checkpoint downloaded and handed to ``on_restore``, then its
values taken) and the sharing of a checkpoint (``checkpoint`` with ``share``: the file uploaded as an artifact).

These are PBT's exploit and explore in the trial's own process: nothing restarts."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import pathlib
import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import httpx

from leyline import CheckpointRequest, HparamsRequest, RestoreRequest
from nissa.calls import as_result
from nissa.control.commands import CommandContext, CommandRejected
from nissa.hub.config import HubConfig
from nissa.hub.rest import artifact_url, auth_headers
from nissa.hub.secret import run_secret
from nissa.telemetry.profile_handler import ArtifactUploader, UploadConfig

logger = logging.getLogger(__name__)
HparamsHook = Callable[[dict[str, Any]], Any]
RestoreHook = Callable[[pathlib.Path], Any]
DOWNLOAD_TIMEOUT_S = 120.0

class HparamsHandler:
    """``hparams``: its ``on_hparams`` function applies the values, then the run's config takes them (and sends
    them: the server's copy of the config, what filters read, follows the run)."""

    def __init__(self, config: MutableMapping[str, Any]) -> None:
        self.fn: HparamsHook | None = None
        self._config = config

    def take(self, values: Mapping[str, Any]) -> dict[str, Any]:
        if self.fn is None:
            raise CommandRejected("this run sets no run.on_hparams function: it cannot change its values live")
        changed = {k: v for k, v in values.items()}
        result = self.fn(dict(changed))
        self._config.update(changed)
        return {**changed, **(as_result(result) if isinstance(result, dict) else {})}

    def apply(self, ctx: CommandContext[HparamsRequest]) -> None:
        ctx.complete(as_result(self.take(ctx.request.values)))


class RestoreHandler:
    """``restore``: the shared checkpoint downloaded under the run's directory, handed to ``on_restore``, and
    its values taken (``hparams``)."""

    def __init__(self, hub: HubConfig, hparams: HparamsHandler) -> None:
        self.fn: RestoreHook | None = None
        self._hub = hub
        self._hparams = hparams

    def apply(self, ctx: CommandContext[RestoreRequest]) -> None:
        command = ctx.request
        if self.fn is None:
            raise CommandRejected("this run sets no run.on_restore function: it cannot load another run's weights")
        if command.values and self._hparams.fn is None:
            raise CommandRejected("this run sets no run.on_hparams function: it cannot take the copied values")
        if not self._hub.server:
            raise CommandRejected("this run has no server to download the checkpoint from")
        began = time.monotonic()
        path = self._download(command.source_run_id, command.artifact)
        self.fn(path)
        values = self._hparams.take(command.values) if command.values else {}
        ctx.complete(as_result({"source_run_id": command.source_run_id, "artifact": command.artifact,
                                "bytes": path.stat().st_size, "ms": round((time.monotonic() - began) * 1000, 1),
                                **values}))

    def _download(self, run_id: str, name: str) -> pathlib.Path:
        folder = self._hub.run_dir / "restored"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{run_id}-{name}"
        server = self._hub.server.split(",")[0] if self._hub.server else ""
        try:
            with httpx.stream("GET", artifact_url(server, run_id, name), headers=auth_headers(self._hub.token),
                              timeout=DOWNLOAD_TIMEOUT_S) as reply:
                if reply.status_code != 200:
                    reply.read()
                    raise CommandRejected(f"artifact {name!r} of run {run_id!r}: HTTP {reply.status_code} "
                                          f"{reply.text[:200]}")
                with path.open("wb") as out:
                    for chunk in reply.iter_bytes():
                        out.write(chunk)
        except httpx.HTTPError as err:
            raise CommandRejected(f"artifact {name!r} of run {run_id!r} could not be downloaded: {err}") from None
        return path


def checkpoint_path(result: object) -> pathlib.Path | None:
    """The file an ``on_checkpoint`` function saved, from what it returned (a path, or a dict with ``path``)."""
    if isinstance(result, Mapping):
        result = result.get("path")
    if isinstance(result, (str, os.PathLike)):
        path = pathlib.Path(result)
        return path if path.is_file() else None
    return None


class Sharing:
    """Uploads a checkpoint's file for other runs (``checkpoint`` with ``share``), then finishes the command."""

    def __init__(self, hub: HubConfig) -> None:
        self._hub = hub
        self._uploader: ArtifactUploader | None = None

    def share(self, ctx: CommandContext[CheckpointRequest], returned: object) -> None:
        path = checkpoint_path(returned)
        if path is None:
            raise CommandRejected("a shared checkpoint needs on_checkpoint to return the saved file's path")
        if not self._hub.server:
            raise CommandRejected("this run has no server to share its checkpoint with")
        if self._uploader is None:
            self._uploader = ArtifactUploader(UploadConfig(server=self._hub.server.split(",")[0],
                                                           run_id=self._hub.run_id, token=self._hub.token,
                                                           secret=run_secret(self._hub.run_dir)))
        name = f"checkpoint-{ctx.command_id[:12]}-step{ctx.step}{path.suffix or '.pt'}"[:128]
        base = {**as_result(returned if isinstance(returned, Mapping) else {}), "path": str(path),
                "bytes": path.stat().st_size}

        def done(future: concurrent.futures.Future[str]) -> None:
            err = future.exception()
            if err is None:
                ctx.complete({**base, "artifact": future.result()})
            else:
                ctx.fail(f"the checkpoint could not be shared: {err}", base)

        self._uploader.submit(path, name).add_done_callback(done)
