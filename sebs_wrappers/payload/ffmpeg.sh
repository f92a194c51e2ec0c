#!/bin/sh
# SeBS 220.video-processing runs function/ffmpeg/ffmpeg. This launcher runs the ffmpeg binary the
# package bootstrap found (imageio-ffmpeg's, else the one on PATH) and keeps it to one thread per
# stage, because the invoker gives each call exactly one core.
bin="${SEBS_FFMPEG_BINARY:-ffmpeg}"
threads="${SEBS_FFMPEG_THREADS:-1}"
n=$#
i=0
for arg in "$@"; do
  i=$((i + 1))
  # per-file options precede their file: each input (-i) and the output (the last argument)
  if [ "$i" -eq "$n" ] || [ "$arg" = "-i" ]; then
    set -- "$@" -threads "$threads"
  fi
  set -- "$@" "$arg"
done
shift "$n"
exec "$bin" -filter_threads "$threads" -filter_complex_threads "$threads" "$@"
