# Sourced by the gpu_session scripts (after they set TOTAL_S and the work folder W): the session clock
# (left: seconds left of TOTAL_S; stage: a timestamped line in $W/stages.txt), the offline env, and the
# carried bundle (build_bundle.sh) on PYTHONPATH.
T0=$(date +%s)
left() { echo $(( TOTAL_S - ($(date +%s) - T0) )); }
stage() { echo "== $(date +%T) +$(( $(date +%s) - T0 )) s: $*" | tee -a "$W/stages.txt"; }
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 MPLBACKEND=Agg
PY=${PY:-python3}
if [ -d .devbundle/whl ] && [ -z "${NO_BUNDLE:-}" ]; then
  stage "install bundle"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .devbundle/whl/*.whl > /tmp/bundle_install.txt 2>&1 || echo "bundle install failed (/tmp/bundle_install.txt)"
  export PYTHONPATH="/tmp/site:$PWD/.devbundle/pkgs:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
