#!/usr/bin/env bash
# Install the system software the full test suite needs (Debian 12, as root). Idempotent.
#   - R with mlr, ParamHelpers, lhs, randomForest (tools/install-r.sh), for the mbo optimizer and rpy2
#   - slurm-wlm and munge, for the one-node Slurm cluster the site tests submit real jobs to
#   - chromium and chromium-driver, the headless browser the report tests open the HTML report in
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

bash "$here/install-r.sh"

missing=()
for pkg in slurm-wlm munge chromium chromium-driver; do
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
echo "install-system-deps: OK: R packages, slurm-wlm, munge and chromium present"
