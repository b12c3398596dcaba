"""docs/serving_page.png: the server's web page translating a paragraph, its alternatives below, in headless
Chromium (1000x700), the page as tests/test_serve.py drives it.

    python scripts/page_screenshot.py --model work/sample/checkpoints/rope_transformer_seed1 work/sample/data-bin \
        --output docs/serving_page.png

Starts fairseq-rope-serve on a free port with the --model given (after recipes/wmt14_en_de/sample.sh), types
--text into the page, waits until its translation and alternatives are shown (nothing stale, no request
running) and saves the screenshot. Needs Chromium and chromedriver (Debian: apt-get install chromium
chromium-driver) and selenium (the test extra).
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

TEXT = ("The old man will open a beautiful box in the city. The small dog sees the red house.\n\n"
        "Her girls bought this new ticket last year.")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", required=True, metavar="MODEL_DIR [DATA_BIN]",
                        help="fairseq-rope-serve's --model")
    parser.add_argument("--output", default="docs/serving_page.png")
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--size", default="1000,700", help="the page's size, WIDTH,HEIGHT (default: 1000,700)")
    args = parser.parse_args(argv)

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    serve = os.path.join(os.path.dirname(sys.executable), "fairseq-rope-serve")
    server = subprocess.Popen([serve, "--model", *args.model, "--port", str(port), "--device", "cpu"])
    url = f"http://127.0.0.1:{port}/"
    options = webdriver.ChromeOptions()
    options.binary_location = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))))
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={args.size}",
                 "--hide-scrollbars"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        deadline = time.monotonic() + 120
        while True:  # until the server listens (the page is served while the model loads, and waits for it)
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        width, height = map(int, args.size.split(","))
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {  # (the page's size, the window's less)
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        browser.get(url)
        wait = WebDriverWait(browser, 300, poll_frequency=0.1)
        wait.until(lambda b: b.find_element(By.ID, "target").get_attribute("value"))
        browser.find_element(By.ID, "text").send_keys(args.text)
        browser.find_element(By.ID, "translate").click()
        translated = ("const t = document.getElementById('translation'); return !!t.textContent &&"
                      " !t.classList.contains('stale') && t.getAttribute('aria-busy') === 'false' &&"
                      " !document.getElementById('alternatives-box').hidden")
        wait.until(lambda b: b.execute_script(translated))
        time.sleep(0.3)
        browser.execute_script("document.activeElement.blur()")
        assert browser.save_screenshot(args.output), args.output
        print(f"{args.output}: {browser.find_element(By.ID, 'translation').text!r}")
    finally:
        browser.quit()
        server.send_signal(signal.SIGTERM)
        server.wait(60)


if __name__ == "__main__":
    main()
