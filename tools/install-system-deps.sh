#!/usr/bin/env bash
# Install the system software the full test suite needs (Debian 12, as root). Idempotent.
#   - R with mlr, ParamHelpers, lhs, randomForest (tools/install-r.sh), for the mbo optimizer and rpy2
#   - slurm-wlm and munge, for the one-node Slurm cluster the site tests submit real jobs to
#   - chromium and chromium-driver, the headless browser the report tests open the HTML report in
#   - postgresql, the server the PostgreSQL store tests start on loopback (initdb, pg_ctl)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

bash "$here/install-r.sh"

missing=()
for pkg in slurm-wlm munge chromium chromium-driver postgresql; do
    [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" == "install ok installed" ]] || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
    echo "install-system-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
for tool in sbatch slurmctld slurmd munged chromium chromedriver; do
    command -v "$tool" >/dev/null || { echo "install-system-deps: $tool is missing after install" >&2; exit 1; }
done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "install-system-deps: initdb is missing after install" >&2; exit 1; }
echo "install-system-deps: OK: R packages, slurm-wlm, munge, chromium and postgresql present"
