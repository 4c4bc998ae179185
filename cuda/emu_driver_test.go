//go:build cudaemu

package cuda

// The host side of the CUDA kernel emulator (cuda/emu): building the
// cuda-emu executable from the unmodified kernel sources with the host C++
// compiler under AddressSanitizer and UndefinedBehaviorSanitizer, and a
// pool of running cuda-emu processes that execute launchSpecs on emulated
// device memory. See cuda/emu/cuda_emu.h for what the emulator can and
// cannot see.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// emuFlags compile every unit of cuda-emu. -ffp-contract=off keeps a*b+c
// two roundings, as the kernels' __fmul_rn / __fadd_rn ask.
var emuFlags = []string{
	"-std=c++17", "-O1", "-g", "-fno-omit-frame-pointer",
	"-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all",
	"-ffp-contract=off", "-Wall", "-Wno-unknown-pragmas", "-Werror",
}

// emuUnits are the translation units: kernels.cc includes ../kernels/ninfer.cu.
var emuUnits = []string{"kernels.cc", "runtime.cc", "driver.cc"}

func emuCompiler() string {
	if c := os.Getenv("CXX"); c != "" {
		return c
	}
	return "g++"
}

// buildEmu compiles cuda-emu into ../.cache/cuda-emu/<hash of sources,
// flags and compiler>/ unless it is there already, and returns its path.
func buildEmu() (string, error) {
	cxx := emuCompiler()
	ver, err := exec.Command(cxx, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("cuda emulator: the C++ compiler %q: %w", cxx, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%q\n", ver, emuFlags)
	var srcs []string
	for _, pat := range []string{"emu/*.h", "emu/*.cc", "emu/include/*.h", "kernels/*.cu", "kernels/*.cuh"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			return "", err
		}
		srcs = append(srcs, m...)
	}
	sort.Strings(srcs)
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", s, len(b))
		h.Write(b)
	}
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "cuda-emu", hex.EncodeToString(h.Sum(nil))[:16]))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cuda-emu")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	objs := make([]string, len(emuUnits))
	errs := make([]error, len(emuUnits))
	var wg sync.WaitGroup
	for i, u := range emuUnits {
		objs[i] = filepath.Join(dir, strings.TrimSuffix(u, ".cc")+".o")
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append(append([]string{}, emuFlags...), "-Iemu/include", "-include", "emu/cuda_emu.h", "-c", filepath.Join("emu", u), "-o", objs[i])
			if out, err := exec.Command(cxx, args...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("cuda emulator: %s %s: %v\n%s", cxx, u, err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	tmp := bin + ".tmp"
	args := append(append(append([]string{}, emuFlags...), objs...), "-o", tmp)
	if out, err := exec.Command(cxx, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cuda emulator: link: %v\n%s", err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// emuBuf is one buffer of emulated device memory: data is sent before a
// launch and, for back buffers, replaced by the kernel's result after it.
type emuBuf struct {
	dev  devPtr
	data []byte
	back bool
}

// at is the device address of byte off of b.
func (b *emuBuf) at(off int) devPtr { return b.dev + devPtr(off) }

// emuMem is the device memory of one test case: every buffer at its own
// 256-byte aligned address, as cuMemAlloc returns.
type emuMem struct{ bufs []*emuBuf }

// buf adds a buffer holding data (copied).
func (m *emuMem) buf(data []byte, back bool) *emuBuf {
	b := &emuBuf{dev: devPtr(len(m.bufs)+1) << 40, data: bytes.Clone(data), back: back}
	m.bufs = append(m.bufs, b)
	return b
}

// nanBuf adds a result buffer of n bytes filled with 0xff (NaN floats), so
// that elements a kernel fails to write show.
func (m *emuMem) nanBuf(n int) *emuBuf {
	return m.buf(bytes.Repeat([]byte{0xff}, n), true)
}

// emuProc is one running cuda-emu.
type emuProc struct {
	cmd    *exec.Cmd
	in     *bufio.Writer
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
}

func startEmu(bin string) (*emuProc, error) {
	cmd := exec.Command(bin)
	// Sanitizer reports go to stderr; halt_on_error ends the process at
	// the first one.
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:abort_on_error=0",
		"UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &emuProc{cmd: cmd, stdin: stdin, in: bufio.NewWriterSize(stdin, 1<<20), out: bufio.NewReaderSize(stdout, 1<<20), stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// fail ends p after an error and returns the error with what p printed.
func (p *emuProc) fail(kernel string, err error) error {
	_ = p.stdin.Close()
	werr := p.cmd.Wait()
	msg := strings.TrimSpace(p.stderr.String())
	if len(msg) > 6000 {
		msg = msg[:6000] + "\n..."
	}
	return fmt.Errorf("cuda-emu died running %s (%v, %v):\n%s", kernel, err, werr, msg)
}

func (p *emuProc) close() {
	_ = binary.Write(p.in, binary.LittleEndian, uint32(3))
	_ = p.in.Flush()
	_ = p.stdin.Close()
	_ = p.cmd.Wait()
}

// list returns the kernels cuda-emu was built with and their signatures.
func (p *emuProc) list() (map[string]string, error) {
	le := binary.LittleEndian
	if err := binary.Write(p.in, le, uint32(2)); err != nil {
		return nil, err
	}
	if err := p.in.Flush(); err != nil {
		return nil, p.fail("list", err)
	}
	var n uint32
	if err := binary.Read(p.out, le, &n); err != nil {
		return nil, p.fail("list", err)
	}
	ks := map[string]string{}
	for range n {
		var s [2]string
		for i := range s {
			var l uint16
			if err := binary.Read(p.out, le, &l); err != nil {
				return nil, p.fail("list", err)
			}
			b := make([]byte, l)
			if _, err := io.ReadFull(p.out, b); err != nil {
				return nil, p.fail("list", err)
			}
			s[i] = string(b)
		}
		ks[s[0]] = s[1]
	}
	return ks, nil
}

// launch runs l on mem and copies the back buffers' results into them.
func (p *emuProc) launch(l launchSpec, mem *emuMem) error {
	le := binary.LittleEndian
	w := p.in
	put := func(v any) { _ = binary.Write(w, le, v) }
	put(uint32(1))
	put(uint16(len(l.kernel)))
	w.WriteString(l.kernel)
	for _, v := range l.dims.grid {
		put(uint32(v))
	}
	for _, v := range l.dims.block {
		put(uint32(v))
	}
	put(uint32(l.dims.shared))
	put(uint32(len(mem.bufs)))
	for _, b := range mem.bufs {
		put(b.dev)
		put(uint64(len(b.data)))
		back := uint8(0)
		if b.back {
			back = 1
		}
		put(back)
		w.Write(b.data)
	}
	put(uint32(len(l.args)))
	for _, a := range l.args {
		put(a)
	}
	if err := w.Flush(); err != nil {
		return p.fail(l.kernel, err)
	}
	var status uint32
	if err := binary.Read(p.out, le, &status); err != nil {
		return p.fail(l.kernel, err)
	}
	for _, b := range mem.bufs {
		if b.back {
			if _, err := io.ReadFull(p.out, b.data); err != nil {
				return p.fail(l.kernel, err)
			}
		}
	}
	return nil
}

// emulator is the pool of cuda-emu processes the parity cases share.
type emulator struct {
	bin   string
	sigs  map[string]string // kernel -> parameter kinds
	procs chan *emuProc

	mu       sync.Mutex
	launched map[string]int // kernel -> launches that completed
}

var emuOnce = sync.OnceValues(func() (*emulator, error) {
	bin, err := buildEmu()
	if err != nil {
		return nil, err
	}
	e := &emulator{bin: bin, launched: map[string]int{}}
	p, err := startEmu(bin)
	if err != nil {
		return nil, err
	}
	if e.sigs, err = p.list(); err != nil {
		return nil, err
	}
	n := min(2, runtime.GOMAXPROCS(0))
	e.procs = make(chan *emuProc, n)
	e.procs <- p
	for range n - 1 {
		p, err := startEmu(bin)
		if err != nil {
			return nil, err
		}
		e.procs <- p
	}
	return e, nil
})

// theEmulator builds cuda-emu (once) and returns the pool.
func theEmulator(t *testing.T) *emulator {
	t.Helper()
	e, err := emuOnce()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// launch checks l against ninfer.ptx and runs it on mem in one of the
// pool's processes (restarting it when a kernel killed it). A zero l is
// checked to be expected by the caller and does nothing.
func (e *emulator) launch(t *testing.T, l launchSpec, err error, mem *emuMem) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if l.kernel == "" {
		t.Fatal("the launch is empty")
	}
	sig, ok := e.sigs[l.kernel]
	if !ok {
		t.Fatalf("%s: not in the emulator's kernel table (cuda/emu/kernels.cc)", l.kernel)
	}
	checkLaunchAgainstPTX(t, l, sig)
	p := <-e.procs
	lerr := p.launch(l, mem)
	if lerr != nil {
		np, err := startEmu(e.bin)
		if err != nil {
			t.Fatalf("restart cuda-emu: %v", err)
		}
		p = np
	}
	e.procs <- p
	if lerr != nil {
		t.Fatal(lerr)
	}
	e.mu.Lock()
	e.launched[l.kernel]++
	e.mu.Unlock()
}
