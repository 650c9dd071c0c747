#!/usr/bin/env bash
# Install R and the R packages emews' R optimizers need (Debian 12, as root). Idempotent:
# when R and every package are present it only verifies them.
#
#   tools/install-r.sh            # then: pip install -e '.[r]'   (rpy2>=3.5,<3.6 for R 4.2)
#
# mlrMBO and smoof are not packaged by Debian (and CRAN may be unreachable): the mbo optimizer
# then runs its fallback built from mlr + ParamHelpers + lhs + randomForest.
set -euo pipefail

PACKAGES=(r-base-core r-base-dev r-cran-mlr r-cran-paramhelpers r-cran-lhs r-cran-randomforest)
R_LIBS_CHECK='library(mlr); library(lhs); library(randomForest); library(ParamHelpers)'

missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ! command -v R >/dev/null 2>&1 || ! command -v Rscript >/dev/null 2>&1; then
    [[ " ${missing[*]-} " == *" r-base-core "* ]] || missing+=(r-base-core)
fi

installed="nothing to install"
if (( ${#missing[@]} )); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "install-r: missing ${missing[*]}; run as root (or with sudo)" >&2
        exit 1
    fi
    echo "install-r: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
    installed="installed ${missing[*]}"
fi

# Verify by loading the packages: check the exit status AND the output, since R tools can
# report failure only in their output (install.packages() exits 0 when it fails).
out=$(Rscript -e "suppressPackageStartupMessages({$R_LIBS_CHECK}); cat('EMEWS_R_OK', as.character(getRversion()), '\n')" 2>&1) && rc=0 || rc=$?
if [[ $rc -ne 0 ]] || ! grep -q '^EMEWS_R_OK ' <<<"$out" || grep -qiE '^Error|there is no package' <<<"$out"; then
    echo "install-r: verification failed (Rscript exit $rc):" >&2
    echo "$out" >&2
    exit 1
fi
version=$(grep '^EMEWS_R_OK ' <<<"$out" | awk '{print $2}')
mbo=$(Rscript -e 'cat(if (requireNamespace("mlrMBO", quietly = TRUE)) "mlrMBO" else "fallback (mlr + randomForest)")' 2>/dev/null || echo "unknown")
echo "install-r: OK: R $version with mlr, ParamHelpers, lhs, randomForest ($installed; mbo implementation: $mbo)"
