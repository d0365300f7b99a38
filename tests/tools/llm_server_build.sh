#!/usr/bin/env bash
# llm_server_build.sh: builds the tests' real LLM server (llama.cpp's llama-server, CPU only) once
# into a cache outside the checkout, and writes the tiny random model the tests serve with it.
#
# Usage: llm_server_build.sh CACHE LLAMA_CPP_PYTHON_VERSION GGUF_VERSION MODEL_OUT JOBS
#
# llama.cpp comes from the sources vendored in the llama-cpp-python sdist on PyPI (a release
# a package registry carries), built with cmake for the server target alone; the model from
# tests/tools/tiny_gguf.py with the gguf package of PyPI, in a virtual environment of the
# cache. What is built stays: a second call finds it and does nothing. On failure, the reason
# goes to MODEL_OUT.why (tests/check/12-llama-server.bats reports it) and the status is 1.
set -euo pipefail

cache=$1 version=$2 gguf_version=$3 model=$4 jobs=${5:-2}
here=$(cd "$(dirname "$0")" && pwd)
dir="$cache/llama-cpp-python-$version"
server="$dir/bin/llama-server"
why="$model.why"
mkdir -p "$(dirname "$model")"
rm -f "$why"

fail() {
	echo "$*" | tee "$why" >&2
	exit 1
}

# A virtual environment of the cache, with PyPI's gguf: its pip also fetches the sdist, so
# that neither needs a pip of the system's Python.
mkdir -p "$cache"
venv="$cache/gguf-$gguf_version"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import gguf' 2>/dev/null; then
	rm -rf "$venv"
	python3 -m venv "$venv" >/dev/null 2>&1 || fail "python3 cannot make a virtual environment (make deps installs python3-venv)"
	"$venv/bin/python" -m pip install -q "gguf==$gguf_version" >"$cache/gguf.log" 2>&1 ||
		fail "cannot install gguf==$gguf_version from PyPI: $(tail -n 3 "$cache/gguf.log" | tr '\n' ' ')"
fi

if [ ! -x "$server" ]; then
	command -v cmake >/dev/null || fail "no cmake (make deps installs it) to build llama-server"
	command -v c++ >/dev/null || fail "no C++ compiler (make deps installs g++) to build llama-server"
	mkdir -p "$dir"
	tarball="$dir/llama_cpp_python-$version.tar.gz"
	if [ ! -s "$tarball" ]; then
		echo "llm_server_build: downloading the llama-cpp-python $version sdist (llama.cpp's sources) from PyPI" >&2
		# --no-binary for this package alone: with :all:, the sdist's build requirements
		# (scikit-build-core and theirs) are built from source too, for minutes, to read its metadata.
		"$venv/bin/python" -m pip download -q --no-deps --no-binary llama-cpp-python --dest "$dir" "llama-cpp-python==$version" \
			>"$dir/download.log" 2>&1 || fail "cannot download llama-cpp-python==$version from PyPI: $(tail -n 3 "$dir/download.log" | tr '\n' ' ')"
	fi
	src="$dir/src"
	if [ ! -f "$src/CMakeLists.txt" ]; then
		rm -rf "$src" "$dir/unpack"
		mkdir -p "$dir/unpack"
		tar -xzf "$tarball" -C "$dir/unpack" "llama_cpp_python-$version/vendor/llama.cpp" ||
			fail "cannot unpack $tarball"
		mv "$dir/unpack/llama_cpp_python-$version/vendor/llama.cpp" "$src"
		rm -rf "$dir/unpack"
	fi
	echo "llm_server_build: building llama-server (CPU only, -j$jobs; once: it stays in $dir)" >&2
	# No web UI (it would be downloaded), no TLS, no tests or examples: the server alone,
	# statically linked, for any x86-64 of this kind (GGML_NATIVE off).
	cmake -S "$src" -B "$dir/cmake" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
		-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
		>"$dir/cmake.log" 2>&1 || fail "cmake could not configure llama.cpp: see $dir/cmake.log"
	nice cmake --build "$dir/cmake" --target llama-server -j"$jobs" >"$dir/build.log" 2>&1 ||
		fail "llama-server did not build: see $dir/build.log ($(tail -n 2 "$dir/build.log" | tr '\n' ' '))"
	mkdir -p "$dir/bin"
	cp "$dir/cmake/bin/llama-server" "$server.tmp" && mv "$server.tmp" "$server"
	rm -rf "$dir/cmake" # 1 GB of objects; the binary is what the tests need
fi

if [ ! -s "$model" ] || [ "$here/tiny_gguf.py" -nt "$model" ]; then
	"$venv/bin/python" "$here/tiny_gguf.py" "$model.tmp" || fail "tests/tools/tiny_gguf.py could not write the model"
	mv "$model.tmp" "$model"
fi
ln -sfn "$server" "$(dirname "$model")/llama-server"
