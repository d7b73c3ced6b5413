#!/usr/bin/env bash
# The console's desktop entry and AppStream metainfo pass their validators (desktop-file-validate,
# appstreamcli validate --no-net: errors and warnings fail) and agree with each other and with the
# console: one id, dev.paddock.Paddock, for the desktop file, the icon, the metainfo's launchable
# and QGuiApplication::desktopFileName (app/main.cpp).
# Exits 77 (ctest: skipped) when a validator is not installed (scripts/setup-deps installs them).
#
# Usage: desktop_files_test.sh SOURCE_DIR
set -uo pipefail

src=$1
id=dev.paddock.Paddock
desktop=$src/installers/desktop/$id.desktop
metainfo=$src/installers/desktop/$id.metainfo.xml

fail() { echo "FAILED: $*" >&2; exit 1; }
command -v desktop-file-validate >/dev/null || { echo "SKIPPED: desktop-file-validate is not installed (Debian: desktop-file-utils)" >&2; exit 77; }
command -v appstreamcli >/dev/null || { echo "SKIPPED: appstreamcli is not installed (Debian: appstream)" >&2; exit 77; }

out=$(desktop-file-validate "$desktop" 2>&1) || fail "desktop-file-validate: $out"
if grep -qE '(error|warning):' <<<"$out"; then fail "desktop-file-validate: $out"; fi
echo "desktop-file-validate $id.desktop: OK${out:+ ($out)}"

out=$(appstreamcli validate --no-net "$metainfo" 2>&1) || fail "appstreamcli validate: $out"
echo "appstreamcli validate $id.metainfo.xml: $(tail -n 1 <<<"$out")"

grep -qx "Icon=$id" "$desktop" || fail "$id.desktop: Icon is not $id"
grep -qx "Exec=paddock" "$desktop" || fail "$id.desktop: Exec is not paddock"
grep -q "<id>$id</id>" "$metainfo" || fail "$id.metainfo.xml: the component id is not $id"
grep -q "<launchable type=\"desktop-id\">$id.desktop</launchable>" "$metainfo" \
  || fail "$id.metainfo.xml: the launchable is not $id.desktop"
grep -q "setDesktopFileName(QStringLiteral(\"$id\"))" "$src/app/main.cpp" \
  || fail "app/main.cpp does not set the desktop file name $id: window managers would not match the console's windows to its entry and icon"
for icon in paddock.svg paddock-64.png paddock-128.png paddock-256.png; do
  [ -f "$src/resources/icons/$icon" ] || fail "resources/icons/$icon (installed as the $id icon) is missing"
done
echo "desktop entry, metainfo, icon and the console agree on $id"
