#!/usr/bin/env bash
# Installs Debian's Chromium and ChromeDriver for the browser tests (tests/test_ui_browser.py)
# when they are missing: /usr/bin/chromium and /usr/bin/chromedriver. Needs root or sudo.
set -euo pipefail

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
APT=(-o DPkg::Lock::Timeout=300)
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get "${APT[@]}" update -qq
$SUDO apt-get "${APT[@]}" install -y -qq --no-install-recommends chromium chromium-driver
chromium --version
chromedriver --version
