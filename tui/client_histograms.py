"""The console's reads of a run's distributions (``GET /runs/{id}/series``, ``GET /runs/{id}/histograms/{name}``),
a part of ``NissaClient``."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import msgspec

from leyline.payloads_histogram import HistogramsReply

HISTOGRAM_COUNTS = "histogram.histograms.count"
"""The series each distribution's count makes, labelled with its name (``histogram=<name>``)."""
_histograms_decoder = msgspec.json.Decoder(HistogramsReply)


class HistogramReads:
    """``NissaClient``'s distribution reads (it provides ``_request``)."""

    async def _request(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        raise NotImplementedError

    async def histogram_names(self, run_id: str) -> list[str]:
        """Names of a run's distributions: the ``histogram`` label of the series their counts make."""
        items = (await self._request("GET", f"/runs/{run_id}/series")).json()
        return sorted({str(label) for item in items if item.get("name") == HISTOGRAM_COUNTS
                       and (label := (item.get("labels") or {}).get("histogram")) is not None})

    async def histograms(self, run_id: str, name: str, max_steps: int, rank: int = 0) -> HistogramsReply:
        """One name's distributions over the run's steps, one rank's, at most ``max_steps`` spread over the run."""
        path = f"/runs/{run_id}/histograms/{quote(name, safe='/')}"
        response = await self._request("GET", path, params={"max_steps": max_steps, "rank": rank})
        return _histograms_decoder.decode(response.content)
