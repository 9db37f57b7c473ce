"""Concurrent requests gathered into one device call.

The first request to arrive opens a window of `window_s` seconds; the batch runs when the
window closes or `max_batch` requests are waiting, in a worker thread, so that the event loop
keeps taking requests while the device computes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Callable, Sequence


class Batcher:
    """`await submit(item)` answers with `run_batch([.., item, ..])`'s result for `item`."""

    def __init__(self, run_batch: Callable[[Sequence[Any]], Sequence[Any]], max_batch: int,
                 window_s: float):
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.window_s = window_s
        self._queue: asyncio.Queue = asyncio.Queue()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "jaxrl-serve-batch")

    async def submit(self, item: Any) -> Any:
        """`item`'s result, once its batch has run (its exception, if the batch failed)."""
        future = asyncio.get_running_loop().create_future()
        await self._queue.put((item, future))
        return await future

    async def _gather(self) -> list:
        """The next batch: the first waiting request and those arriving within the window."""
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        deadline = loop.time() + self.window_s
        while len(batch) < self.max_batch:
            if not self._queue.empty():
                batch.append(self._queue.get_nowait())
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except asyncio.TimeoutError:
                break
        return batch

    async def serve_forever(self) -> None:
        """Run batches until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._gather()
            items = [item for item, _ in batch]
            try:
                results = await loop.run_in_executor(self._executor, self.run_batch, items)
            except Exception as error:  # every waiting request gets the batch's error
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), result in zip(batch, results):
                if not future.done():  # a request whose client went away is cancelled
                    future.set_result(result)

    def close(self) -> None:
        """Stop the worker thread (after the batch it is running)."""
        self._executor.shutdown(wait=True)
