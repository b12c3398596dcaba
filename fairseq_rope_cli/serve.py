"""fairseq-rope-serve: trained models behind LibreTranslate's API, with a web page.

    fairseq-rope-serve --model work/sample/checkpoints/rope_transformer work/sample/data-bin
    curl -s localhost:5000/translate -H 'Content-Type: application/json' \
        -d '{"q": "The small dog sees the red house.", "source": "en", "target": "de"}'

Each --model is one language pair: a checkpoints directory and the data-bin it was trained on
(--checkpoint-file as in fairseq-rope-translate, default the recipe's average where it exists, else
checkpoint_best.pt), or a fairseq-rope-ct2 export alone. The pair is the model's own. --backend auto
(the default) serves a checkpoint with CTranslate2 where it gives fairseq's translations (ctranslate2
installed; RoPE, the transformer, Shaw's RPE or T5's bias; a sentence-level model): a float32 export
made on first use and cached beside the checkpoint (keyed by its content), about 3x fairseq's
sentences/s on a CPU (docs/serving.md); else fairseq, with one line saying why. Clients that speak LibreTranslate (deep-translator, SearXNG, Weblate, ...) use it as they
use LibreTranslate: POST /translate with q (a text or a list), source, target, format (text or html),
alternatives and api_key, as JSON or a form; POST /translate_file with a file (.txt, .html, .srt, .vtt,
.docx: --file-limit bytes, its text within --file-char-limit, in parts through the queue; inline elements nested
at most --nesting-limit deep, as in an HTML text), source and target, then GET its
translatedFileUrl (once; removed after --file-keep seconds); GET /languages, /health, /frontend/settings; errors as
{"error": "..."} with 400, 403, 404, 405, 413, 429, 500 or 503 (with Retry-After). Texts are running
text: split into sentences, translated, put back with their layout (docs/serving.md). A web page is at
/ (--no-web-page turns it off). The sentences of concurrent requests are translated together in batches
(--max-tokens, --batch-wait-ms); SIGTERM or Ctrl-C finishes the requests in flight, then exits. Every
request is one line on stderr (method, path, status, seconds); fairseq's own lines (loading a model)
only with --log-level info. Needs the serve extra: pip install 'fairseq-rope[serve]'.
"""

import copy
import logging
import os
import sys

from fairseq_rope_translation.model_files import EXPORT_ON_FAIRSEQ, model_files

from .common import AVERAGED, InputError, argument_parser, model_checkpoint

PROG = "fairseq-rope-serve"


def parse_args(argv=None):
    ap = argument_parser(PROG, __doc__)
    ap.add_argument("--model", nargs="+", action="append", required=True, metavar=("MODEL_DIR", "DATA_BIN"),
                    help="a checkpoints directory and its data-bin, or a fairseq-rope-ct2 export; once per model")
    ap.add_argument("--checkpoint-file", help=f"the checkpoint in each fairseq MODEL_DIR (default: {AVERAGED} "
                                              "where it exists, else checkpoint_best.pt)")
    ap.add_argument("--backend", choices=["auto", "fairseq", "ctranslate2"], default="auto",
                    help="auto: CTranslate2 where it gives fairseq's translations, else fairseq (default: %(default)s)")
    ap.add_argument("--quantization", choices=["int8", "int8_float32", "int16", "float16", "bfloat16", "float32"],
                    help="CTranslate2's computation type, the weights quantized as the model loads (default: "
                         "float32; int8: faster, translations may differ: docs/serving.md)")
    ap.add_argument("--host", default="127.0.0.1", help="(default: %(default)s; 0.0.0.0 to serve other machines)")
    ap.add_argument("--port", type=int, default=5000, help="(default: %(default)s, LibreTranslate's)")
    ap.add_argument("--beam", type=int, default=4, help="(default: %(default)s)")
    ap.add_argument("--lenpen", type=float, default=0.6, help="(default: %(default)s)")
    ap.add_argument("--device", help="cpu or cuda (default: cuda when torch sees a GPU, else cpu)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for translation (default: one fewer than "
                                                           "the CPU's cores, leaving one to answer requests)")
    ap.add_argument("--char-limit", type=int, default=5000,
                    help="characters per request, all its texts together; 0: no limit (default: %(default)s)")
    ap.add_argument("--batch-limit", type=int, default=32, help="texts per request (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds a request may take before it is answered 503 (default: %(default)s)")
    ap.add_argument("--queue-size", type=int, default=2000,
                    help="sentences that may wait per model; a request past it is answered 503 (default: %(default)s)")
    ap.add_argument("--max-tokens", type=int, default=2048,
                    help="source subwords per beam search (default: %(default)s)")
    ap.add_argument("--batch-wait-ms", type=float, default=10.0,
                    help="how long to wait for more sentences before a beam search (default: %(default)s)")
    ap.add_argument("--api-keys", metavar="FILE", help="API keys, one a line, each optionally followed by its "
                                                       "requests per minute; when given, every request needs one")
    ap.add_argument("--req-limit", type=int, default=0,
                    help="requests per minute per client without keys; 0: no limit (default: %(default)s)")
    ap.add_argument("--file-limit", type=int, default=10 << 20,
                    help="bytes of a file sent to POST /translate_file; 0: no limit (default: %(default)s, 10 MiB)")
    ap.add_argument("--file-char-limit", type=int, default=1000000,
                    help="characters of a file's text (the Files tab, POST /translate_file), apart from --char-limit, "
                         "which is the text box's; 0: no limit (default: %(default)s). A file of more sentences than "
                         "--queue-size goes through the queue in parts")
    ap.add_argument("--nesting-limit", type=int, default=100,
                    help="inline elements (<b>, <a>, a cue's <i>) open inside one another in an HTML text or a file; "
                         "deeper is a 400 naming the limit; 0: no limit (default: %(default)s)")
    ap.add_argument("--file-keep", type=float, default=600.0,
                    help="seconds a translated file waits for its download before it is removed (default: %(default)s)")
    ap.add_argument("--no-web-page", action="store_true", help="no web page at /")
    ap.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning",
                    help="the log lines of fairseq and the other libraries shown, from this level (default: "
                         "%(default)s; info: fairseq's lines of each beam search too); the server's own line per "
                         "request is shown at any level")
    return ap.parse_args(argv)


def read_api_keys(path):
    """{key: requests per minute (0: no limit)} from ``path``: a key a line, optionally followed by its
    rate; blank lines and lines starting with # are skipped."""
    if not os.path.isfile(path):
        raise InputError(PROG, f"--api-keys file not found: {path}")
    keys = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if len(words) > 2 or (len(words) == 2 and not words[1].isdigit()):
                raise InputError(PROG, f"{path}, line {n}: expected a key and optionally its requests per minute "
                                       f"(a whole number), got {line.strip()!r}")
            keys[words[0]] = int(words[1]) if len(words) == 2 else 0
    if not keys:
        raise InputError(PROG, f"--api-keys {path} holds no key")
    return keys


def check_models(args):
    """[(model_dir, data_bin or None, checkpoint file or None)], each checked before anything loads."""
    found = []
    for given in args.model:
        if len(given) > 2:
            raise InputError(PROG, f"--model takes MODEL_DIR and optionally DATA_BIN, got {len(given)} paths: "
                                   f"{' '.join(given)}")
        model_dir, data_bin = given[0], (given[1] if len(given) == 2 else None)
        if not os.path.isdir(model_dir):
            raise InputError(PROG, f"--model directory not found: {model_dir}")
        files = model_files(model_dir, data_bin, args.backend)
        if data_bin is None:
            if not files.export:
                raise InputError(PROG, f"--model {model_dir}: no model.bin, so not a fairseq-rope-ct2 export; a "
                                       "checkpoints directory needs its data-bin: --model MODEL_DIR DATA_BIN")
            if files.misfit == EXPORT_ON_FAIRSEQ:
                raise InputError(PROG, f"--model {model_dir} is a CTranslate2 export: not with --backend fairseq")
            found.append((model_dir, None, None))
            continue
        if not os.path.isdir(data_bin):
            raise InputError(PROG, f"--model {model_dir}: data-bin directory not found: {data_bin}")
        found.append((model_dir, data_bin, model_checkpoint(PROG, model_dir, args.checkpoint_file)))
    return found


def main(argv=None):
    args = parse_args(argv)
    for flag in ("beam", "batch_limit", "queue_size", "max_tokens"):
        if getattr(args, flag) < 1:
            raise InputError(PROG, f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    for flag in ("char_limit", "req_limit", "threads", "batch_wait_ms", "file_limit", "file_char_limit",
                 "nesting_limit"):
        if getattr(args, flag) < 0:
            raise InputError(PROG, f"--{flag.replace('_', '-')} must be >= 0, got {getattr(args, flag)}")
    if args.timeout <= 0:
        raise InputError(PROG, f"--timeout must be > 0 seconds, got {args.timeout}")
    if args.file_keep <= 0:
        raise InputError(PROG, f"--file-keep must be > 0 seconds, got {args.file_keep}")
    if not 0 < args.port < 65536:
        raise InputError(PROG, f"--port must be 1 to 65535, got {args.port}")
    if args.quantization and args.backend == "fairseq":
        raise InputError(PROG, "--quantization is CTranslate2's: not with --backend fairseq")
    keys = read_api_keys(args.api_keys) if args.api_keys else None
    specs = check_models(args)
    try:
        import uvicorn

        from fairseq_rope_server.app import Limits, ServedModel, make_app
    except ImportError as error:
        raise InputError(PROG, f"{error.name} is not installed: pip install 'fairseq-rope[serve]'") from None
    from fairseq_rope_checkpoints import CheckpointError
    from fairseq_rope_translation.loader import check_device, load_translator

    # fairseq, as it is imported, has every library log to stderr from DEBUG (fairseq's lines of each beam
    # search among them); the server's own lines go through uvicorn's handler (below), at any level
    logging.getLogger().setLevel(args.log_level.upper())

    try:
        device = check_device(args.device)
    except ValueError as error:
        raise InputError(PROG, f"--device: {error}") from None
    threads = args.threads or max(1, (os.cpu_count() or 2) - 1)
    if device == "cpu":  # (on a 2-core CPU, 1 thread translates 30% faster under load than 2: docs/serving.md)
        import torch

        torch.set_num_threads(threads)

    def load():
        models = []
        for model_dir, data_bin, checkpoint in specs:
            try:
                mt = load_translator(model_dir, data_bin, checkpoint_file=checkpoint, beam=args.beam,
                                     lenpen=args.lenpen, device=device, backend=args.backend,
                                     compute_type=args.quantization or "default",
                                     threads=threads if device == "cpu" else 0)
            except Exception as error:  # a missing or damaged file is one line; anything else names its kind
                known = isinstance(error, (FileNotFoundError, ValueError, CheckpointError))
                print(f"{PROG}: error: {error if known else f'{type(error).__name__}: {error}'}", file=sys.stderr)
                os._exit(1)  # (in the loading thread: the server must not go on without the model)
            model = ServedModel(mt, args.beam)
            if any((m.source, m.target) == (model.source, model.target) for m in models):
                print(f"{PROG}: error: two models translate {model.source}-{model.target}; give one per pair",
                      file=sys.stderr)
                os._exit(1)
            models.append(model)
            print(f"[{PROG}] {model.source}-{model.target} from {model_dir} ready", file=sys.stderr, flush=True)
        return models

    limits = Limits(char_limit=args.char_limit, batch_limit=args.batch_limit, timeout=args.timeout,
                    queue_size=args.queue_size, max_tokens=args.max_tokens, batch_wait=args.batch_wait_ms / 1000,
                    api_keys=keys, req_limit=args.req_limit, web_page=not args.no_web_page,
                    file_limit=args.file_limit, file_char_limit=args.file_char_limit, file_keep=args.file_keep,
                    nesting_limit=args.nesting_limit)
    print(f"[{PROG}] http://{args.host}:{args.port}/ (loading {len(specs)} model(s); /health says when ready)",
          file=sys.stderr, flush=True)
    # the server's line per request (fairseq_rope_server.app) as uvicorn writes its own, on stderr
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["loggers"]["fairseq_rope_server.app"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    # and the library's (which engine loads each model, why not the other) levelled beside them
    log_config["loggers"]["fairseq_rope_translation"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    uvicorn.run(make_app([], limits, load=load), host=args.host, port=args.port, log_level="info", access_log=False,
                log_config=log_config, timeout_graceful_shutdown=int(args.timeout) + 5)


if __name__ == "__main__":
    main()
