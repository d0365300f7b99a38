# device-env.sh: sourced on a GPU machine that lacks cJSON and bats (the device image):
# unpacks the Debian packages carried in .devdeps/ (apt-get download libcjson1 bats
# bats-support bats-assert) into /tmp/kg-deps and points PATH, LD_LIBRARY_PATH and
# BATS_LIB_PATH there.
mkdir -p /tmp/kg-deps
for deb in .devdeps/*.deb; do
	dpkg -x "$deb" /tmp/kg-deps
done
export PATH="/tmp/kg-deps/usr/bin:$PATH"
export LD_LIBRARY_PATH="/tmp/kg-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export BATS_LIB_PATH=/tmp/kg-deps/usr/lib/bats
