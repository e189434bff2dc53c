# /etc/profile.d/distconv.sh: Debian's /etc/profile sets PATH anew for every login shell
# (bash -l, sh -l, bash --login), dropping the image's /opt/venv/bin, so `bash -lc "distconv
# train ..."` found no distconv (exit 127) and `python` was the system one without distconv.
# /etc/profile reads this file after it: the virtual environment comes first again.
PATH="/opt/venv/bin:$PATH"
export PATH
