"""fairseq-rope-serve's doors, in process (Starlette's TestClient on make_app, test_serve's model): every
answer JSON with its status (an unknown path, a wrong method, a body too large or too deep, a bug); media
types in any case; one rule for whole numbers and for bytes that are not UTF-8; random requests never a
500 (hypothesis); one log line per request."""

import json
import logging
import re
import string
import urllib.parse

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.routing import Route
from starlette.testclient import TestClient

from fairseq_rope_server.app import MAX_DEPTH, Limits, ServedModel, make_app
from test_serve import SENTENCES, model  # noqa: F401 (model: the fixture, test_serve's served model)

LIMITS = Limits(char_limit=5000, batch_wait=0, web_page=False)  # (the page at / is HTML: test_serve's)
TRANSLATE = {"q": SENTENCES[0], "source": "en", "target": "de"}


@pytest.fixture(scope="module")
def mt(model):  # noqa: F811
    """test_serve's model, its beam 2 and its translations 8 subwords at most: here the doors are tested,
    not the translations, and an untrained model's 200 subwords take seconds."""
    from fairseq_rope.hub import load_translator

    return load_translator(model[0], model[1], device="cpu", beam=2, max_len_b=8)


@pytest.fixture(scope="module")
def client(mt):
    with TestClient(make_app([ServedModel(mt)], LIMITS)) as client:
        yield client


def error_of(answer, status):
    """The message of an error answer: JSON {"error": str} with ``status`` and CORS."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["access-control-allow-origin"] == "*"
    body = answer.json()
    assert list(body) == ["error"] and isinstance(body["error"], str), body
    return body["error"]


def test_an_unknown_path_a_wrong_method_a_large_or_deep_body_are_json_errors(client):
    assert "Not Found: /translation" in error_of(client.get("/translation"), 404)
    answer = client.put("/translate", json=TRANSLATE)
    assert "Method Not Allowed: PUT /translate (allowed: POST)" in error_of(answer, 405)
    assert answer.headers["allow"] == "POST"
    assert re.search(r"POST /health \(allowed: .*GET", error_of(client.post("/health"), 405))
    limit = LIMITS.body_limit()
    assert limit == 1 << 20
    big = client.post("/translate", content=b" " * (limit + 1), headers={"Content-Type": "application/json"})
    assert f"the body is larger than the limit ({limit} bytes)" in error_of(big, 413)
    deep = client.post("/translate", content=b"[" * 100_000, headers={"Content-Type": "application/json"})
    assert f"nests arrays and objects deeper than {MAX_DEPTH} levels" in error_of(deep, 400)
    # brackets in a text are text, and a request within the limits is answered
    assert client.post("/translate", json={**TRANSLATE, "q": "[" * 100 + SENTENCES[0]}).status_code == 200
    at_limit = json.dumps(TRANSLATE).encode()
    at_limit += b" " * (limit - len(at_limit))
    assert client.post("/translate", content=at_limit, headers={"Content-Type": "application/json"}).status_code == 200


def test_a_cors_preflight_is_answered_in_json_with_its_cors_headers(client):
    """A browser's preflight (OPTIONS with Origin and Access-Control-Request-Method): Starlette's CORS headers,
    a JSON body: {} where the request may be made, {"error": ...} (400) where its method is not taken."""
    asked = {"Origin": "https://example.org", "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "content-type"}
    answer = client.options("/translate", headers=asked)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == {} and answer.headers["content-length"] == str(len(answer.content))
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["access-control-allow-methods"] == "GET, POST"
    assert answer.headers["access-control-allow-headers"].lower() == "content-type"
    assert int(answer.headers["access-control-max-age"]) > 0
    assert error_of(client.options("/translate", headers={**asked, "Access-Control-Request-Method": "PUT"}), 400) == \
        "Disallowed CORS method"
    assert client.options("/translate").status_code == 405  # (no preflight: the route's own answer)


def test_a_bug_is_a_json_500_saying_internal_error_and_its_traceback_is_logged(mt, caplog, monkeypatch):
    """The client learns no more than "internal error"; the log has the traceback. A bug in an endpoint
    (Server.languages here) or outside one (a route of its own) alike."""
    from fairseq_rope_server import app as served

    def broken(*args):
        raise ZeroDivisionError("the bug's own words")

    monkeypatch.setattr(served.Server, "languages", broken)
    app = make_app([ServedModel(mt)], LIMITS)
    app.router.routes.append(Route("/broken", broken))
    with TestClient(app, raise_server_exceptions=False) as client:
        assert error_of(client.get("/languages"), 500) == "internal error"
        assert error_of(client.get("/broken"), 500) == "internal error"
        assert client.get("/health").status_code == 200
    bug = [r for r in caplog.records if r.name == "fairseq_rope_server.app" and r.levelno == logging.ERROR]
    assert len(bug) == 1 and bug[0].getMessage() == "internal error in GET /languages"
    assert bug[0].exc_info[0] is ZeroDivisionError and "the bug's own words" in caplog.text


def multipart(fields: dict) -> bytes:
    """multipart/form-data with the boundary "XyZ": each field a part (a value as bytes as it is)."""
    return b"".join(b'--XyZ\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
                    % (name.encode(), value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass"))
                    for name, value in fields.items()) + b"--XyZ--\r\n"


@pytest.mark.parametrize("kind", ["Application/JSON", "application/json; charset=utf-8",
                                  "APPLICATION/X-WWW-FORM-URLENCODED; charset=UTF-8", "Multipart/Form-Data"])
def test_media_types_are_read_in_any_case_and_with_parameters(client, mt, kind):
    if "multipart" in kind.lower():
        body, kind = multipart(TRANSLATE), kind + "; boundary=XyZ"
    elif "json" in kind.lower():
        body = json.dumps(TRANSLATE)
    else:
        body = "q=" + SENTENCES[0].replace(" ", "+") + "&source=en&target=de"
    answer = client.post("/translate", content=body, headers={"Content-Type": kind})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"translatedText": mt.translate_text(SENTENCES[0])}


def test_a_body_of_another_media_type_is_refused_by_name(client):
    answer = client.post("/translate", content=json.dumps(TRANSLATE), headers={"Content-Type": "text/plain"})
    assert 'a body of type "text/plain"; send application/json' in error_of(answer, 400)


@pytest.mark.parametrize("as_form, value, says", [
    (False, 2.5, "2.5"), (False, True, "true"), (False, "lots", '"lots"'), (False, [1], "[1]"),
    (True, "2.5", '"2.5"'), (True, "true", '"true"'), (True, "lots", '"lots"'),
    (False, 1, None), (False, "1", None), (False, None, None), (False, "", None), (True, "1", None), (True, "", None)])
def test_a_whole_number_is_a_json_integer_or_digits_by_one_rule(client, as_form, value, says):
    """alternatives (beam 2: 0 or 1): a JSON integer, or digits (a form's, or in JSON); missing, null or
    empty: 0; anything else (2.5, true, "lots") a 400 naming the field, what it must be and what it got."""
    fields = {**TRANSLATE, "alternatives": value}
    answer = client.post("/translate", data=fields) if as_form else client.post("/translate", json=fields)
    if says is None:
        assert answer.status_code == 200, answer.text
        assert len(answer.json().get("alternatives", [])) == (1 if value in (1, "1") else 0)
    else:
        assert error_of(answer, 400) == ("Invalid request: alternatives must be a whole number (a JSON integer, or "
                                         f"digits in a form or the URL), got {says}")


@pytest.mark.parametrize("where", ["JSON", "form", "form %-escape", "multipart", "URL"])
def test_bytes_that_are_not_utf8_are_a_400_wherever_they_come(client, where):
    """A 0xFF byte in a text: a 400 saying so, in a JSON body, a form (as it is or %FF), multipart form
    data or the URL's query alike; so is a lone surrogate, which JSON can write (\\ud800) but UTF-8 not."""
    rest = b"&source=en&target=de"
    if where == "JSON":
        answer = client.post("/translate", content=b'{"q": "a\xff", "source": "en", "target": "de"}',
                             headers={"Content-Type": "application/json"})
    elif where == "form":
        answer = client.post("/translate", content=b"q=a\xff" + rest,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
    elif where == "form %-escape":
        answer = client.post("/translate", content=b"q=a%FF" + rest,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
    elif where == "multipart":
        answer = client.post("/translate", content=multipart({**TRANSLATE, "q": b"a\xff"}),
                             headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
    else:
        answer = client.post("/translate?q=a%FF" + rest.decode())
    message = error_of(answer, 400)
    assert "is not UTF-8 (" in message and "0xff" in message, message
    if where == "JSON":
        answer = client.post("/translate", content=b'{"q": "a\\ud800", "source": "en", "target": "de"}',
                             headers={"Content-Type": "application/json"})
        assert "lone surrogate" in error_of(answer, 400)


ACCESS = re.compile(r"(GET|POST|PUT) (/\S*) (\d{3}) \d+\.\d{3} s")


def test_each_request_is_one_info_line_of_method_path_status_and_seconds(client, caplog):
    """The server's own logger, fairseq_rope_server.app: one line per request, its query left out (it may hold
    texts and keys)."""
    caplog.set_level(logging.INFO, logger="fairseq_rope_server.app")
    client.get("/health")
    client.post("/translate?api_key=secret&q=private", json={"source": "en", "target": "de"})
    client.put("/translate")
    client.get("/no/such%20path")
    lines = [r.getMessage() for r in caplog.records if r.name == "fairseq_rope_server.app"]
    assert [ACCESS.fullmatch(line).groups() for line in lines] == [
        ("GET", "/health", "200"), ("POST", "/translate", "200"), ("PUT", "/translate", "405"),
        ("GET", "/no/such%20path", "404")], lines
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "fairseq_rope_server.app")


# ---- random requests ----------------------------------------------------------------------------
# texts of any characters, now and then a lone surrogate (which JSON can write, UTF-8 not)
TEXTS = st.text(max_size=20) | st.sampled_from(["\ud800", "The dog \udfff ."])
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | TEXTS,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                           max_size=4),
                           max_leaves=12)


def mostly(value, others):
    """``value`` two times in three, else one of ``others``."""
    return st.one_of(st.just(value), st.just(value), others)


# the fields of POST /translate as a client might mix them up: good ones (translated) among other types and values
FIELDS = st.fixed_dictionaries(
    {"q": st.one_of(TEXTS, st.lists(TEXTS, max_size=3), JSON_VALUES),
     "source": mostly("en", st.one_of(st.sampled_from(["de", "auto", ""]), JSON_VALUES)),
     "target": mostly("de", st.one_of(st.sampled_from(["en", "fr"]), JSON_VALUES))},
    optional={"format": mostly("text", st.one_of(st.sampled_from(["html", "pdf"]), JSON_VALUES)),
              "alternatives": st.one_of(st.sampled_from([0, 1, 2, -1, 2.5, True, "1", "lots", "", 10 ** 40]),
                                        JSON_VALUES),
              "api_key": JSON_VALUES})


# media types: ours in any case, with parameters or without (a boundary), others; or any text
KINDS = st.one_of(st.sampled_from(["application/json", "Application/JSON; charset=utf-8", "text/plain", "",
                                   "application/x-www-form-urlencoded", "multipart/form-data",
                                   "multipart/form-data; boundary=x", "application/json; charset=latin-1"]),
                  st.text(string.printable.strip(), max_size=30))


def as_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@st.composite
def aimed(draw):
    """POST /translate with FIELDS as JSON, a form, multipart form data or in the URL, its media type in
    any case (or another one): (method, path, media type, body)."""
    fields, way = draw(FIELDS), draw(st.sampled_from(["json", "form", "multipart", "url"]))
    pairs = [(name, as_text(v)) for name, value in fields.items()
             for v in (value if name == "q" and isinstance(value, list) and value else [value])]
    kind = {"json": "application/json", "form": "application/x-www-form-urlencoded",
            "multipart": "multipart/form-data", "url": ""}[way]
    kind = draw(st.sampled_from([kind, kind.upper(), kind.title()]))
    kind += "; boundary=XyZ" if way == "multipart" else draw(st.sampled_from(["", "; charset=utf-8"])) if kind else ""
    kind = draw(st.just(kind) | KINDS)  # (or one the body is not)
    encoded = urllib.parse.urlencode(pairs, errors="surrogatepass")  # (a surrogate as bytes that are not UTF-8)
    body = {"json": lambda: json.dumps(fields).encode(), "form": lambda: encoded.encode(),
            "multipart": lambda: multipart(dict(pairs)), "url": lambda: b""}[way]()
    path = "/translate?" + encoded if way == "url" else "/translate"
    return "POST", path, kind, body


PATHS = st.one_of(st.sampled_from(["/translate", "/languages", "/detect", "/health", "/frontend/settings", "/",
                                   "/translate/", "/nope", "/translate?q=a%FF&source=en", "/translate?q=x&q=y"]),
                  st.text(string.ascii_letters + string.digits + "/._-%?=&+", max_size=30).map(lambda p: "/" + p))
METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
BODIES = st.one_of(st.binary(max_size=200), FIELDS.map(lambda fields: json.dumps(fields).encode()),
                   JSON_VALUES.map(lambda value: json.dumps(value).encode()),
                   st.integers(30, 5000).map(lambda n: b"[" * n + b"]" * n))
# two requests in three aimed at /translate, one with anything (mostly a POST /translate too)
REQUESTS = st.one_of(aimed(), aimed(), st.tuples(mostly("POST", METHODS), mostly("/translate", PATHS), KINDS, BODIES))


@settings(max_examples=200, deadline=None, derandomize=True, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(request=REQUESTS, origin=st.booleans())
@example(request=("POST", "/translate", "application/json", b"[" * 100_000), origin=False)
@example(request=("POST", "/translate", "Application/JSON", json.dumps(TRANSLATE).encode()), origin=False)
@example(request=("POST", "/translate", "application/x-www-form-urlencoded", b"q=\xff&source=en&target=de"),
         origin=True)
def test_random_requests_are_never_a_500_and_always_answered_in_json(client, request, origin):
    """Any method, path, media type and body (random bytes, random JSON, fields of any type in any
    encoding, deep nesting): an answer below 500, a JSON body ({"error": str} for an error; none for
    HEAD), and the server answers /health after it."""
    method, path, kind, body = request
    headers = {"Content-Type": kind} if kind else {}
    if origin:
        headers["Origin"] = "https://example.org"
    answer = client.request(method, path, content=body, headers=headers)
    assert answer.status_code < 500, answer.text
    if method != "HEAD":
        got = json.loads(answer.content)
        if answer.status_code >= 400:
            assert list(got) == ["error"] and isinstance(got["error"], str), got
    assert client.get("/health").status_code == 200
