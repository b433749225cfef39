"""The console's reads of a run's distributions (``GET /runs/{id}/histograms``, ``GET /runs/{id}/histograms/{name}``),
a part of ``NissaClient``."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import msgspec

from leyline.payloads_histogram import DistributionNames, HistogramsReply

_histograms_decoder = msgspec.json.Decoder(HistogramsReply)
_names_decoder = msgspec.json.Decoder(DistributionNames)


class HistogramReads:
    """``NissaClient``'s distribution reads (it provides ``_request``)."""

    async def _request(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        raise NotImplementedError

    async def distribution_names(self, run_id: str, q: str = "", offset: int = 0,
                                 limit: int = 100) -> DistributionNames:
        """A page of a run's distribution names, in the server's one order (a loop's own before ``debug/…``),
        those holding ``q`` only."""
        params: dict[str, str | int] = {"q": q, "offset": offset, "limit": limit}
        return _names_decoder.decode((await self._request("GET", f"/runs/{run_id}/histograms", params=params)).content)

    async def histograms(self, run_id: str, name: str, max_steps: int, rank: int = 0) -> HistogramsReply:
        """One name's distributions over the run's steps, one rank's, at most ``max_steps`` spread over the run."""
        path = f"/runs/{run_id}/histograms/{quote(name, safe='/')}"
        response = await self._request("GET", path, params={"max_steps": max_steps, "rank": rank})
        return _histograms_decoder.decode(response.content)
