"""A translation server that LibreTranslate's clients speak to (fairseq-rope-serve).

    app = make_app([ServedModel(load_translator(...))], Limits(char_limit=5000))
    uvicorn.run(app, host="127.0.0.1", port=5000)

LibreTranslate's API (``POST /translate``, ``GET /languages``, ``GET /health``, ``GET /frontend/settings``,
errors as ``{"error": ...}``, CORS for every origin) over one or more models, each a language pair, and a
web page at ``/``. Every answer is JSON, errors too (an unknown path, a wrong method, a body too
large, a bug: "internal error", its traceback logged); each request is one INFO line of the logger
``fairseq_rope_server.app`` (method, path, status, seconds). A text is running text
(fairseq_rope_text.running_text: split into sentences, its layout kept) or HTML (the text between its
tags translated, the tags kept). The sentences of all requests to a model wait in one queue per model;
a thread takes them, round robin over the requests that wait (one sentence of each in turn, so a long
text does not hold a short one behind it), up to a budget of source subwords or a short wait for more,
and translates them in one beam search. A document-level model translates the sentences of a request
as one document, one request at a time. Files (``POST /translate_file``, LibreTranslate's: .txt, .html,
.srt, .vtt, .docx, read by fairseq_rope_text.files) are translated as a request of their units' texts,
through the same queue; the translated file waits in a temporary folder for its one ``GET
/download_file/NAME`` (or ``file_keep`` seconds), the folder removed at shutdown. A request's texts and files
are read, split, encoded, joined and written in threads (asyncio.to_thread), the loop free to answer others;
inline elements nested deeper than ``nesting_limit`` are a 400.

Only the standard library at import time besides Starlette (the ``serve`` extra).
"""

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Dict, List, Optional

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from fairseq_rope_text import files
from fairseq_rope_text.markup import NESTING_LIMIT, MarkupError
from fairseq_rope_translation.texts import SplitTexts

LOG = logging.getLogger(__name__)  # one INFO line per request; tracebacks of internal errors
MAX_DEPTH = 32  # arrays and objects in one another in a JSON body (a request needs 2)
WEB_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web", "index.html")
NAMES = {"ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
         "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French", "hi": "Hindi", "hu": "Hungarian",
         "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "nl": "Dutch",
         "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian",
         "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese"}


@dataclass
class Limits:
    """What one request may ask and how the queue is run (fairseq-rope-serve's flags)."""
    char_limit: int = 5000          # characters per request, all its texts together (0: none)
    batch_limit: int = 32           # texts per request (q as a list)
    timeout: float = 60.0           # seconds a request may wait for its translation
    queue_size: int = 2000          # sentences waiting per model; a request that does not fit: 503
    max_tokens: int = 2048          # source subwords per beam search
    batch_wait: float = 0.01        # seconds to wait for more sentences before a beam search
    api_keys: Optional[Dict[str, int]] = None  # key: requests per minute (0: no limit); None: no keys
    req_limit: int = 0              # requests per minute per client without keys (0: no limit)
    file_limit: int = 10 << 20      # bytes of a POST /translate_file's body (0: no limit)
    file_char_limit: int = 1000000  # characters of a file's text (0: no limit), apart from char_limit
    nesting_limit: int = NESTING_LIMIT  # inline elements inside one another, in HTML and cues (0: no limit)
    file_keep: float = 600.0        # seconds a translated file waits for its download
    web_page: bool = True

    def body_limit(self) -> int:
        """Bytes a request's body may hold (413 past it): 1 MiB, or 12 bytes per character of char_limit
        and 64 KiB more where that is more (a character may take 12: a JSON escape of a surrogate pair,
        four %XX of UTF-8); 16 MiB with no character limit."""
        return max(1 << 20, 12 * self.char_limit + (64 << 10)) if self.char_limit else 16 << 20


class ServedModel:
    """A loaded translator (fairseq_rope_translation.interface.TranslatorInterface, on either engine) as the server
    uses it."""

    def __init__(self, translator, beam: Optional[int] = None):
        self.translator = translator
        self.source, self.target = translator.source_lang, translator.target_lang
        self.beam = beam or translator.beam
        self.context = int(getattr(translator.preprocessing, "context", 0) or 0)

    def encode(self, sentence: str) -> List[str]:
        """The model's input for ``sentence``: its subwords."""
        return self.translator.subwords(sentence)

    def nbest(self, inputs: list, n: int, align: bool = False) -> List[List[str]]:
        """Each encoded sentence's ``n`` best translations (fewer where the beam found fewer), best first:
        the best is what ``translator.translate_text`` gives the sentence; aligned with ``align``."""
        return self.translator.translate_subwords(inputs, self.beam, nbest=n, align=align)

    def document(self, sentences: List[str]) -> List[List[str]]:
        """A document-level model's translations of ``sentences`` as one document, each in context."""
        return [[t] for t in self.translator.translate_documents([sentences], beam=self.beam)[0]]


class Job:
    """One request's sentences for one model, and where their translations go."""

    def __init__(self, sentences: List[str], inputs: list, n: int, loop, future, align: bool = False):
        self.sentences, self.inputs, self.n, self.align = sentences, inputs, n, align  # (align: for inline markup)
        self.lengths = [len(x) for x in inputs]  # source subwords, what a batch's budget counts
        self.results: List[Optional[List[str]]] = [None] * len(sentences)
        self.left = len(sentences)
        self.loop, self.future = loop, future

    def finish(self, error: Optional[BaseException] = None):
        def settle():
            if not self.future.done():
                self.future.set_exception(error) if error else self.future.set_result(self.results)
        self.loop.call_soon_threadsafe(settle)


class Batcher(threading.Thread):
    """The queue of one model and the thread that translates it (see the module's text)."""

    def __init__(self, model: ServedModel, limits: Limits):
        super().__init__(daemon=True, name=f"translate {model.source}-{model.target}")
        self.model, self.limits = model, limits
        self.cond = threading.Condition()
        self.waiting: "collections.OrderedDict[Job, collections.deque]" = collections.OrderedDict()
        self.size = 0
        self.stopping = False
        self.batches = self.sentences = 0  # beam searches run, sentences translated
        self.seconds = 0.0  # spent translating

    def submit(self, job: Job) -> bool:
        """Queues ``job``; False when its sentences do not fit in the queue."""
        if not job.sentences:  # (a text of blank lines only)
            job.finish()
            return True
        with self.cond:
            if self.size + len(job.sentences) > self.limits.queue_size:
                return False
            self.waiting[job] = collections.deque(range(len(job.sentences)))
            self.size += len(job.sentences)
            self.cond.notify()
        return True

    def cancel(self, job: Job):
        with self.cond:
            left = self.waiting.pop(job, None)
            if left:
                self.size -= len(left)

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify()

    def take(self):
        """The next batch: [(job, index)], round robin over the waiting jobs up to the subword budget
        (a document-level model: all of one job)."""
        with self.cond:
            while True:
                while not self.waiting and not self.stopping:
                    self.cond.wait()
                if self.stopping:
                    return None
                batch = self.take_waiting()
                if batch:  # (empty when the requests that waited timed out meanwhile)
                    return batch

    def take_waiting(self):
        """take()'s batch from what waits now (the lock held)."""
        if not self.model.context:
            deadline = time.monotonic() + self.limits.batch_wait
            while self.size < self.limits.queue_size and time.monotonic() < deadline and \
                    sum(job.lengths[i] for job, left in self.waiting.items() for i in left) < self.limits.max_tokens:
                self.cond.wait(max(deadline - time.monotonic(), 0))
        batch, budget = [], self.limits.max_tokens
        if not self.waiting:
            return batch
        if self.model.context:
            job, left = next(iter(self.waiting.items()))
            batch = [(job, i) for i in left]
            left.clear()
        else:
            for job in itertools.cycle(list(self.waiting)):
                left = self.waiting[job]
                if not any(self.waiting.values()):
                    break
                if not left:
                    continue
                length = job.lengths[left[0]]
                if batch and length > budget:
                    break
                batch.append((job, left.popleft()))
                budget -= length
        for job in [job for job, left in self.waiting.items() if not left]:
            del self.waiting[job]
        self.size -= len(batch)
        return batch

    def run(self):
        while True:
            batch = self.take()
            if batch is None:
                return
            started = time.perf_counter()
            try:
                if self.model.context:
                    outputs = self.model.document([job.sentences[i] for job, i in batch])
                else:
                    n = max(job.n for job, _ in batch)
                    align = any(job.align for job, _ in batch)
                    outputs = self.model.nbest([job.inputs[i] for job, i in batch], n, align)
            except Exception as error:  # the requests of this batch get a 500 with its message
                for job in {job for job, _ in batch}:
                    job.finish(error)
                continue
            self.batches += 1
            self.sentences += len(batch)
            self.seconds += time.perf_counter() - started
            for (job, i), hypotheses in zip(batch, outputs):
                job.results[i] = hypotheses[:job.n]
                job.left -= 1
                if job.left == 0:
                    job.finish()


class Failure(Exception):
    """An answer other than 200: LibreTranslate's ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, headers: Optional[dict] = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def shown(value) -> str:
    """``value`` as an error message quotes it: as JSON writes it (true, "lots"), cut at 60 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def utf8(raw: bytes, what: str) -> str:
    """``raw`` decoded; bytes that are not UTF-8 are a 400 naming ``what`` holds them."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Failure(400, f"Invalid request: {what} is not UTF-8 (byte {raw[error.start]:#04x} at "
                           f"{error.start})") from None


def form_fields(text: str, what: str) -> dict:
    """The fields of a form or a URL's query (``a=1&q=x&q=y``); a %-escape that is not UTF-8 is a 400."""
    try:
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as error:
        raise Failure(400, f"Invalid request: {what} is not UTF-8 (a %-escape of byte "
                           f"{error.object[error.start]:#04x})") from None
    return fields(pairs)


def fields(pairs) -> dict:
    """Fields from (name, value) pairs: q as a list where it is given more than once, the last value of
    any other field."""
    values = {name: value for name, value in pairs if name != "q"}
    q = [value for name, value in pairs if name == "q"]
    if q:
        values["q"] = q[0] if len(q) == 1 else q
    return values


STEP = {"[": 1, "{": 1, "]": -1, "}": -1}  # how a bracket changes the depth


def nesting(text: str) -> int:
    """How deep arrays and objects nest in the JSON ``text`` (brackets in its strings not counted): how
    deep json.loads would recurse (100,000 levels: a RecursionError)."""
    unescaped = re.sub(r"\\.", "", text, flags=re.S)  # (\" among them)
    outside = re.sub(r'"[^"]*"?', "", unescaped)  # strings (one not closed: to the end) left out
    return max(itertools.accumulate(map(STEP.get, outside, itertools.repeat(0))), default=0)


def whole_number(params: dict, name: str) -> int:
    """An integer field: a JSON integer or decimal digits (as a form or a URL sends it); 0 where it is
    missing, null or empty. 2.5, true and "lots" are a 400 naming the field."""
    value = params.get(name)
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
        with contextlib.suppress(ValueError):  # (past 4300 digits, Python's limit)
            return int(value)
    raise Failure(400, f"Invalid request: {name} must be a whole number (a JSON integer, or digits in a form or "
                       f"the URL), got {shown(value)}")


class Server:
    def __init__(self, models: List[ServedModel], limits: Limits):
        self.models = {(m.source, m.target): m for m in models}
        self.limits = limits
        self.batchers = {pair: Batcher(m, limits) for pair, m in self.models.items()}
        self.rates: Dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self.folder: Optional[str] = None  # the translated files' temporary folder, made for the first
        self.files: Dict[str, tuple] = {}  # name in the URL: (path, name to download as, media type, expiry)

    # ---- requests -------------------------------------------------------------------------------
    async def body(self, request: Request, limit: Optional[int] = None) -> bytes:
        """The request's body, read up to the limit (413 past it)."""
        limit, chunks, size = self.limits.body_limit() if limit is None else limit, [], 0
        try:
            async for chunk in request.stream():
                chunks.append(chunk)
                size += len(chunk)
                if limit and size > limit:
                    raise Failure(413, f"Invalid request: the body is larger than the limit ({limit} bytes)")
        except ClientDisconnect:
            raise Failure(400, "Invalid request: the client left before sending its whole body") from None
        return b"".join(chunks)

    async def multipart(self, request: Request, body: bytes, max_files: int):
        """The multipart/form-data ``body`` (already read within its limit) parsed, at most ``max_files``
        files; a malformed one is a 400."""
        async def chunks():
            yield body
        try:
            return await MultiPartParser(request.headers, chunks(), max_files=max_files,
                                         max_part_size=self.limits.body_limit()).parse()
        except MultiPartException as error:
            raise Failure(400, f"Invalid request: the multipart body: {error.message}") from None

    async def params(self, request: Request) -> dict:
        """The request's fields from its URL and its body (JSON, a form or multipart form data, each UTF-8;
        the media type in any case, with parameters), as LibreTranslate reads them (deep-translator, for
        one, sends them in the URL of a POST)."""
        values = form_fields(utf8(request.scope["query_string"], "the URL's query"), "the URL's query")
        body = await self.body(request)
        if not body:
            return values
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        text = utf8(body, "the body")
        if kind == "application/json":
            if nesting(text) > MAX_DEPTH:
                raise Failure(400, f"Invalid request: the JSON body nests arrays and objects deeper than "
                                   f"{MAX_DEPTH} levels")
            try:
                given = json.loads(text)
            except ValueError as error:
                raise Failure(400, f"Invalid request: the body is not JSON ({error})") from None
            if not isinstance(given, dict):
                raise Failure(400, "Invalid request: the JSON body must be an object")
            try:  # ("\ud800" is JSON, but no text: not a character of UTF-8)
                json.dumps(given, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise Failure(400, "Invalid request: the JSON body holds a lone surrogate (a \\ud800 to \\udfff "
                                   "escape that is not half of a pair), which is not text") from None
            values.update(given)
        elif kind == "application/x-www-form-urlencoded":
            values.update(form_fields(text, "the form"))
        elif kind == "multipart/form-data":
            form = await self.multipart(request, body, max_files=0)
            values.update(fields(form.multi_items()))
        else:
            raise Failure(400, f"Invalid request: a body of type {shown(kind) if kind else 'none given'}; send "
                               "application/json, application/x-www-form-urlencoded or multipart/form-data")
        return values

    def check_key(self, request: Request, params: dict):
        """403 for a missing or unknown key where keys are needed; 429 past a key's (or a client's) rate."""
        keys = self.limits.api_keys
        if keys is not None:
            key = params.get("api_key") or ""
            if not isinstance(key, str) or key not in keys:
                raise Failure(403, "Invalid API key" if key else "Please contact the server operator to get an "
                                   "API key: this server needs one (api_key)")
            who, rate = f"key {key}", keys[key]
        else:
            who, rate = f"client {request.client.host if request.client else '?'}", self.limits.req_limit
        if rate:
            now = time.monotonic()
            if len(self.rates) > 10000:  # clients not seen for a minute are forgotten
                for gone in [w for w, s in self.rates.items() if not s or s[-1] <= now - 60]:
                    del self.rates[gone]
            stamps = self.rates[who]
            while stamps and stamps[0] <= now - 60:
                stamps.popleft()
            if len(stamps) >= rate:
                raise Failure(429, f"Too many request limits violations: {rate} requests per minute for this "
                                   f"{who.split()[0]}", {"Retry-After": str(max(1, int(stamps[0] + 60 - now) + 1))})
            stamps.append(now)

    def pair(self, source, target) -> ServedModel:
        sources = sorted({s for s, _ in self.models})
        if source == "auto":
            raise Failure(400, f"Invalid request: source 'auto' needs language detection, which this server does "
                               f"not do (each model translates one language pair); give the source language, one "
                               f"of: {', '.join(sources)}")
        if source not in sources:
            raise Failure(400, f"{source} is not supported: source languages are {', '.join(sources)}")
        if (source, target) not in self.models:
            targets = sorted(t for s, t in self.models if s == source)
            raise Failure(400, f"{target} is not supported: from {source} the target languages are "
                               f"{', '.join(targets)}")
        return self.models[(source, target)]

    async def translate(self, request: Request):
        params = await self.params(request)
        self.check_key(request, params)
        for name in ("q", "source", "target"):
            if params.get(name) in (None, ""):
                raise Failure(400, f"Invalid request: missing {name} parameter")
        for name in ("source", "target", "format"):
            if not isinstance(params.get(name, ""), str):
                raise Failure(400, f"Invalid request: {name} must be a string, got {params[name]!r}")
        q, fmt = params["q"], params.get("format", "text")
        if fmt not in ("text", "html"):
            raise Failure(400, f"Invalid request: format {fmt!r} is not one of: text, html")
        batch = isinstance(q, list)
        texts = q if batch else [q]
        if not all(isinstance(t, str) for t in texts):
            raise Failure(400, "Invalid request: q must be a string or a list of strings")
        if batch and len(texts) > self.limits.batch_limit:
            raise Failure(400, f"Invalid request: request ({len(texts)}) exceeds text limit ({self.limits.batch_limit})")
        chars = sum(len(t) for t in texts)
        if self.limits.char_limit and chars > self.limits.char_limit:
            raise Failure(400, f"Invalid request: request ({chars}) exceeds text limit ({self.limits.char_limit})")
        alternatives = whole_number(params, "alternatives")
        model = self.pair(params["source"], params["target"])
        if not 0 <= alternatives < model.beam:
            raise Failure(400, f"Invalid request: alternatives must be 0 to {model.beam - 1} (the beam is {model.beam})")
        if alternatives and model.context:
            raise Failure(400, "Invalid request: alternatives are not offered by a document-level model")
        found = await self.translated(model, texts, fmt, alternatives + 1)
        answer = {"translatedText": found[0] if batch else found[0][0]}
        if alternatives:
            others = found[1:]
            answer["alternatives"] = [[o[i] for o in others] for i in range(len(texts))] if batch else \
                [o[0] for o in others]
        return JSONResponse(answer)

    async def translated(self, model: ServedModel, texts: List[str], fmt: str, n: int = 1,
                         in_parts: bool = False, name: str = "") -> List[List[str]]:
        """``texts`` (``fmt``: "text", "html", or a subtitle format: fairseq_rope_translation.texts.SplitTexts) translated
        by ``model`` through its queue (the request's limits checked before): for k < ``n``, every text with
        each sentence's k-th best translation. ``in_parts`` (a file): sentences past what the queue holds go
        in parts, each waiting for room in the queue and answered within --timeout, in order. ``name``: the
        file's, in errors. The texts' parsing, encoding and joining run in threads (asyncio.to_thread), as a
        file's reading and writing: the loop answers other requests meanwhile."""
        # every text (each paragraph of an HTML text, its inline markup taken out) split into sentences
        try:
            split = await asyncio.to_thread(SplitTexts, texts, fmt, model.source,
                                            nesting_limit=self.limits.nesting_limit)
        except MarkupError as error:
            raise Failure(400, f"Invalid request: {name + ': ' if name else ''}{error} (--nesting-limit; 0: no "
                               "limit)") from None
        sentences, align = split.sentences, split.align
        batcher = self.batchers[(model.source, model.target)]
        busy = Failure(503, f"the server is busy ({self.limits.queue_size} sentences are waiting at most); try "
                            "again", {"Retry-After": "1"})
        if len(sentences) > self.limits.queue_size and not in_parts:
            raise Failure(400, f"Invalid request: {len(sentences)} sentences, more than the queue holds "
                               f"({self.limits.queue_size}); send the text in parts")
        if not in_parts and batcher.size + len(sentences) > self.limits.queue_size:
            raise busy  # (before the work of encoding them)
        loop = asyncio.get_running_loop()
        results: list = []
        size = self.limits.queue_size
        for start in range(0, len(sentences), size) if sentences else [0]:
            part = sentences[start:start + size]
            inputs = await asyncio.to_thread(lambda sentences: [model.encode(s) for s in sentences], part)
            job = Job(part, inputs, n, loop, loop.create_future(), align)
            waited = 0.0
            while not batcher.submit(job):  # a file's part waits for room in the queue, up to --timeout
                if not in_parts or waited >= self.limits.timeout:
                    raise busy
                await asyncio.sleep(0.05)
                waited += 0.05
            try:
                results += await asyncio.wait_for(job.future, self.limits.timeout)
            except asyncio.TimeoutError:
                batcher.cancel(job)
                raise Failure(503, f"the translation took longer than the limit ({self.limits.timeout:g} s); send "
                                   "shorter texts", {"Retry-After": "1"}) from None
            except Exception as error:  # the model failed on this batch
                raise Failure(500, f"translation failed: {error}") from None

        def text_of(k: int) -> List[str]:
            """Every text with each sentence's k-th translation (the best where there are fewer)."""
            return split.join([r[min(k, len(r) - 1)] for r in results], model.translator.preprocessing.words)

        return await asyncio.to_thread(lambda: [text_of(k) for k in range(n)])

    async def languages(self, request: Request):
        codes = sorted({code for pair in self.models for code in pair})  # a target only: no targets
        return JSONResponse([{"code": c, "name": NAMES.get(c, c),
                              "targets": sorted(t for src, t in self.models if src == c)} for c in codes])

    async def health(self, request: Request):
        return JSONResponse({"status": "ok", "models": [f"{s}-{t}" for s, t in self.models],
                             "translated": {f"{s}-{t}": {"sentences": b.sentences, "batches": b.batches,
                                                           "seconds": round(b.seconds, 3)}
                                            for (s, t), b in self.batchers.items()},
                             "queue": {f"{s}-{t}": {"sentences": b.size, "jobs": len(b.waiting)}
                                       for (s, t), b in self.batchers.items()}})

    async def settings(self, request: Request):
        first = next(iter(self.models.values()))
        return JSONResponse({
            "charLimit": self.limits.char_limit or -1, "batchLimit": self.limits.batch_limit,
            "frontendTimeout": int(self.limits.timeout * 1000), "apiKeys": self.limits.api_keys is not None,
            "keyRequired": self.limits.api_keys is not None, "suggestions": False, "filesTranslation": True,
            "supportedFilesFormat": files.supported(),
            "language": {"source": {"code": first.source, "name": NAMES.get(first.source, first.source)},
                         "target": {"code": first.target, "name": NAMES.get(first.target, first.target)}}})

    async def translate_file(self, request: Request):
        """LibreTranslate's POST /translate_file: multipart form data with ``file``, ``source``, ``target`` (and
        ``api_key``); the file translated by its extension (fairseq_rope_text.files), its units through the
        model's queue as one request of texts, kept for ``file_keep`` seconds: {"translatedFileUrl": URL}."""
        values = form_fields(utf8(request.scope["query_string"], "the URL's query"), "the URL's query")
        body = await self.body(request, self.limits.file_limit)
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "multipart/form-data":
            raise Failure(400, f"Invalid request: a body of type {shown(kind) if kind else 'none given'}; send the "
                               "file as multipart/form-data (curl -F file=@talk.srt -F source=en -F target=de)")
        form = await self.multipart(request, body, max_files=1)
        upload = form.get("file")
        values.update(fields([(k, v) for k, v in form.multi_items() if isinstance(v, str)]))
        self.check_key(request, values)
        if upload is None or isinstance(upload, str):
            raise Failure(400, "Invalid request: missing file parameter (a file, as curl -F file=@talk.srt sends it)")
        for name in ("source", "target"):
            if values.get(name) in (None, ""):
                raise Failure(400, f"Invalid request: missing {name} parameter")
        model = self.pair(values["source"], values["target"])
        filename = os.path.basename((upload.filename or "").replace("\\", "/")) or "file"
        try:
            fmt = files.file_format(filename)
            data = await upload.read()
            document = await asyncio.to_thread(files.read_document, data, fmt, filename)
        except files.FileError as error:
            raise Failure(400, f"Invalid request: {error}") from None
        chars = sum(len(unit) for unit in document.units)
        if self.limits.file_char_limit and chars > self.limits.file_char_limit:
            raise Failure(400, f"Invalid request: the file's text ({chars} characters) exceeds the file limit "
                               f"({self.limits.file_char_limit}, --file-char-limit)")
        translations = (await self.translated(model, document.units, document.markup, in_parts=True,
                                              name=filename))[0] if document.units else []
        stem, extension = os.path.splitext(filename)
        download = f"{stem}.{model.target}{extension}"
        self.sweep()
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="fairseq-rope-serve-files-")
        name = secrets.token_urlsafe(16) + extension.lower()
        path = os.path.join(self.folder, name)

        def write():
            data = document.write(translations)
            with open(path, "wb") as f:
                f.write(data)
        await asyncio.to_thread(write)
        media_type = files.MEDIA_TYPES[fmt] if document.encoding in (None, "utf-8") else \
            f"text/html; charset={document.encoding}"  # (a page in the charset it declares)
        self.files[name] = (path, download, media_type, time.monotonic() + self.limits.file_keep)
        return JSONResponse({"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{name}"})

    async def download_file(self, request: Request):
        """GET /download_file/NAME: a translated file, once (removed as it is sent), as an attachment named as
        the file sent with the target language before its extension (talk.de.srt)."""
        self.sweep()
        entry = self.files.pop(request.path_params["name"], None)
        if entry is None:
            raise Failure(404, f"Not Found: no translated file {shown(request.path_params['name'])} (a file is kept "
                               f"until it is downloaded, or {self.limits.file_keep:g} s)")
        path, download, media_type, _ = entry
        with open(path, "rb") as f:
            data = f.read()
        os.remove(path)
        quoted = urllib.parse.quote(download, safe="")
        disposition = f'attachment; filename="{download}"' if quoted == download else \
            f"attachment; filename*=utf-8''{quoted}"
        return Response(data, media_type=media_type, headers={"Content-Disposition": disposition})

    def sweep(self, everything: bool = False):
        """Removes the translated files past their time (all of them, and their folder, with ``everything``)."""
        now = time.monotonic()
        for name in [n for n, entry in self.files.items() if everything or entry[3] <= now]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.files.pop(name)[0])
        if everything and self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    async def detect(self, request: Request):
        raise Failure(400, "Invalid request: this server does not detect languages (each model translates one "
                           "language pair); GET /languages lists them")


def json_error(status: int, message: str, headers: Optional[dict] = None) -> JSONResponse:
    """An answer other than 200: ``{"error": message}``, with CORS as every answer."""
    return JSONResponse({"error": message}, status_code=status,
                        headers={**(headers or {}), "Access-Control-Allow-Origin": "*"})


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's own answers (an unknown path, a method the path does not take) as JSON."""
    path, headers = request.url.path, exc.headers or {}
    if exc.status_code == 404:
        message = f"Not Found: {path} (this server answers POST /translate, GET /languages, GET /health)"
    elif exc.status_code == 405:
        message = f"Method Not Allowed: {request.method} {path} (allowed: {headers.get('Allow')})"
    else:
        message = exc.detail
    return json_error(exc.status_code, message, headers)


class CORS(CORSMiddleware):
    """Starlette's CORS, its answer to a preflight (OPTIONS with Origin and Access-Control-Request-Method)
    JSON as every answer: ``{}``, or ``{"error": ...}`` with its 400; the CORS headers as Starlette sets them."""

    def preflight_response(self, request_headers):
        plain = super().preflight_response(request_headers)
        headers = {k: v for k, v in plain.headers.items() if k not in ("content-length", "content-type")}
        return JSONResponse({} if plain.status_code == 200 else {"error": plain.body.decode()},
                            status_code=plain.status_code, headers=headers)


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    """A bug outside an endpoint (the ASGI server logs its traceback)."""
    return json_error(500, "internal error")


class AccessLog:
    """One INFO line per request: method, path (its query left out: it may hold texts and keys), status
    and seconds, e.g. ``POST /translate 200 0.412 s``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), [500]  # (500 where the app raised before answering)

        async def sending(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            LOG.info("%s %s %d %.3f s", scope["method"], urllib.parse.quote(scope["path"]), status[0],
                     time.perf_counter() - started)


def make_app(models: List[ServedModel], limits: Limits = None, load=None) -> Starlette:
    """The ASGI app over ``models`` (or over what ``load()`` returns, called in a thread at start-up, while
    ``/health`` answers 503 "loading")."""
    limits = limits or Limits()
    state = {"server": None, "failed": None}

    def start(loaded: List[ServedModel]):
        server = Server(loaded, limits)
        for batcher in server.batchers.values():
            batcher.start()
        state["server"] = server

    def endpoint(name):
        async def handle(request: Request):
            server = state["server"]
            if name == "page":  # served while the models load too: it says so and waits for them
                answer = FileResponse(WEB_PAGE, media_type="text/html; charset=utf-8")
            elif state["failed"]:
                answer = json_error(500, f"the models failed to load: {state['failed']}")
            elif server is None:
                answer = JSONResponse({"status": "loading", "models": []} if name == "health" else
                                      {"error": "the models are still loading"}, status_code=503,
                                      headers={"Retry-After": "5"})
            else:
                try:
                    answer = await getattr(server, name)(request)
                except Failure as failure:
                    answer = json_error(failure.status, failure.message, failure.headers)
                except Exception:  # a bug: the client learns no more than that, the log has its traceback
                    LOG.exception("internal error in %s %s", request.method, request.url.path)
                    answer = json_error(500, "internal error")
            answer.headers["Access-Control-Allow-Origin"] = "*"  # on every answer, as LibreTranslate's
            return answer
        return handle

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if load is None:
            start(models)
        else:
            async def loading():
                try:
                    start(await asyncio.to_thread(load))
                except Exception as error:  # every answer says so (a 500), /health too
                    state["failed"] = f"{type(error).__name__}: {error}"
            task = asyncio.ensure_future(loading())

        async def sweeping():  # translated files not downloaded in time are removed
            while True:
                await asyncio.sleep(max(0.1, min(limits.file_keep / 2, 30)))
                if state["server"]:
                    state["server"].sweep()
        sweeper = asyncio.ensure_future(sweeping())
        yield
        sweeper.cancel()
        if load is not None and not task.done():
            task.cancel()
        if state["server"]:
            for batcher in state["server"].batchers.values():
                batcher.stop()
            state["server"].sweep(everything=True)

    routes = [Route("/translate", endpoint("translate"), methods=["POST"]),
              Route("/languages", endpoint("languages"), methods=["GET", "POST"]),
              Route("/detect", endpoint("detect"), methods=["POST"]),
              Route("/translate_file", endpoint("translate_file"), methods=["POST"]),
              Route("/download_file/{name}", endpoint("download_file"), methods=["GET"]),
              Route("/health", endpoint("health"), methods=["GET"]),
              Route("/frontend/settings", endpoint("settings"), methods=["GET"])]
    if limits.web_page:
        routes.append(Route("/", endpoint("page"), methods=["GET"]))
    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={HTTPException: http_error, Exception: internal_error},
                     middleware=[Middleware(AccessLog),
                                 Middleware(CORS, allow_origins=["*"], allow_methods=["GET", "POST"],
                                            allow_headers=["*"])])
