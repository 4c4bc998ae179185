package instance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/ninfer/ninfer-go/nodes/vision"
	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/vision"
)

// noGELU is the CPU backend refusing, as the CUDA backend refuses an op it
// has no kernels for, any graph with a gelu op: only the vision tower has
// one.
type noGELU struct{ *cpu.Backend }

func (b noGELU) Prepare(g *tensor.Graph) (exec.Executable, error) {
	for _, op := range g.Ops {
		if op.Kind == tensor.OpGELU {
			return nil, fmt.Errorf("op %s: no kernels on this backend", op.Kind)
		}
	}
	return b.Backend.Prepare(g)
}

func init() {
	exec.Register("cpu-no-gelu", func(o exec.Options) exec.Backend { return noGELU{cpu.New(o)} })
}

// The vision tower runs on a backend of the target's kind: one that cannot
// run a tower op refuses the vision graph at load, naming the op, and the
// same backend serves text-only graphs.
func TestVisionTowerRefusedAtLoadNamingTheOp(t *testing.T) {
	model, mmproj := sharedModel(t, "tiny-qwen35-vl-f32.gguf"), sharedModel(t, "tiny-qwen35-mmproj-f32.gguf")
	_, err := instance.Open(instance.Options{Model: model, MMProj: mmproj, Graph: "vision", Backend: "cpu-no-gelu", Threads: 1})
	if err == nil || !strings.Contains(err.Error(), "vision tower") || !strings.Contains(err.Error(), "op gelu: no kernels") {
		t.Fatalf("open with a backend without gelu: %v, want a load error naming the vision tower and the op", err)
	}
	in, err := instance.Open(instance.Options{Model: model, Graph: "plain", Backend: "cpu-no-gelu", Threads: 1})
	if err != nil {
		t.Fatalf("plain on a backend without gelu: %v", err)
	}
	in.Close()
}

// LoadPlanWithImages wires the tower into graphs that encode no images:
// a vision.encode node "vision" feeding the images of the top-level
// forwards of the target (not a draft loop's forward), and leaves graphs
// that encode images as written.
func TestLoadPlanWithImagesWiresTheTower(t *testing.T) {
	for _, tc := range []struct {
		graph string
		want  []string // the steps reading vision.embeddings, in plan order
	}{
		{"plain", []string{"fwd"}},
		{"ngram", []string{"fwd"}},
		{"mtp", []string{"fwd"}},
		{"draft", []string{"fwd"}},
		{"vision", nil}, // its own node, see
	} {
		p, err := instance.LoadPlanWithImages(tc.graph, node.Default, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.graph, err)
		}
		var got []string
		for _, st := range p.AllSteps() {
			if st.In["images"] == (plan.Ref{Node: "vision", Port: "embeddings"}) {
				got = append(got, st.ID)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: steps reading vision.embeddings (-want +got):\n%s", tc.graph, diff)
		}
		if !p.Reads(engine.ImagesInput) {
			t.Errorf("%s: the plan reads no images", tc.graph)
		}
		if wired := tc.want != nil; wired != strings.Contains(p.String(), "rewritten: --mmproj wired the vision tower in: node vision (vision.encode on $in.images) feeds the images of fwd\n") {
			t.Errorf("%s: plan header says it was rewritten = %v, want %v:\n%s", tc.graph, !wired, wired, p)
		}
	}
}

// A graph with a node already called vision gets the tower as vision_2.
func TestLoadPlanWithImagesPicksAFreeTowerID(t *testing.T) {
	p, err := instance.LoadPlanWithImages("testdata/node-called-vision.yaml", node.Default, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Step("fwd").In["images"], (plan.Ref{Node: "vision_2", Port: "embeddings"}); got != want {
		t.Errorf("fwd's images <- %v, want %v", got, want)
	}
	if st := p.Step("vision_2"); st == nil || st.Op != "vision.encode" {
		t.Errorf("step vision_2 = %+v, want the vision.encode node", st)
	}
	if !strings.Contains(p.Rewritten, "node vision_2") {
		t.Errorf("Rewritten = %q, want it to name node vision_2", p.Rewritten)
	}
}

// Target forwards a host step splits cannot share one tower node: the
// error names --mmproj and asks for a vision.encode node, and names no node
// the graph's author never wrote. The graph itself compiles.
func TestLoadPlanWithImagesRefusesForwardsSplitByAHostStep(t *testing.T) {
	const graph = "testdata/split-forwards.yaml"
	if _, err := instance.LoadPlan(graph, node.Default, nil); err != nil {
		t.Fatalf("the graph as written: %v", err)
	}
	_, err := instance.LoadPlanWithImages(graph, node.Default, nil)
	if err == nil {
		t.Fatal("LoadPlanWithImages wired a tower across a host step")
	}
	msg := err.Error()
	for _, want := range []string{"--mmproj", "add a vision.encode node", "fwd and fwd2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "vision.embeddings") {
		t.Errorf("error %q names the node the loader would have added", msg)
	}
}

// stepLog records the steps where a decode row verified drafts while
// another row prefilled.
type stepLog struct {
	mu     sync.Mutex
	shared int // steps with drafts verified and prompt tokens fed
}

func (l *stepLog) ObserveStep(s engine.StepInfo) {
	if s.Drafted > 0 && s.PrefillTokens > 0 {
		l.mu.Lock()
		l.shared++
		l.mu.Unlock()
	}
}

// A speculating sequence (ngram) that verifies drafts in the same step as
// another request's image prefill binds the image rows in the feed with
// drafts inserted (executor.Batch.BindRows): both requests give, greedily,
// the tokens they give one after the other.
func TestDraftsVerifiedBesideAnImagePrefill(t *testing.T) {
	model, mmproj := sharedModel(t, "tiny-qwen35-vl-f32.gguf"), sharedModel(t, "tiny-qwen35-mmproj-f32.gguf")
	png, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "golden", "images", "sq64.png"))
	if err != nil {
		t.Skipf("golden image: %v", err)
	}
	log := &stepLog{}
	in, err := instance.Open(instance.Options{Model: model, MMProj: mmproj, Graph: "ngram", Threads: 2, MaxRunning: 2, NoPrefixCache: true, Observer: log})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx := context.Background()
	ip, err := in.PromptWithImages(ctx, "Look: "+vision.MediaMarker+" and say", [][]byte{png}, true, vision.DecodeLimits{}, true)
	if err != nil {
		t.Fatal(err)
	}
	var text []int32
	for range 8 {
		text = append(text, 300, 301, 302, 303)
	}
	texts := engine.Request{Prompt: text, MaxTokens: 40}
	image := engine.Request{Prompt: ip.IDs, Images: ip.Images, MaxTokens: 8}
	var alone [2][]int32
	for i, r := range []engine.Request{texts, image} {
		res, err := in.Generate(ctx, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = res.IDs
	}
	// The image request is submitted while the text request, drafting by
	// then, waits in its Stop at its 15th token: the engine's next step
	// verifies the text's drafts and prefills the image.
	var together [2][]int32
	var imageErr error
	var wg sync.WaitGroup
	n := 0
	withStop := texts
	withStop.Stop = func(int32) bool {
		if n++; n == 15 {
			submitted := make(chan (<-chan engine.Event), 1)
			wg.Go(func() {
				ch, err := in.Engine.Submit(ctx, image)
				if imageErr = err; err != nil {
					close(submitted)
					return
				}
				submitted <- ch
				for ev := range ch {
					if ev.Done {
						imageErr = ev.Err
						continue
					}
					together[1] = append(together[1], ev.Token)
				}
			})
			<-submitted
		}
		return false
	}
	res, err := in.Generate(ctx, withStop, nil)
	wg.Wait()
	if err != nil || imageErr != nil {
		t.Fatal(err, imageErr)
	}
	together[0] = res.IDs
	if diff := cmp.Diff(alone, together); diff != "" {
		t.Errorf("[text, image] tokens (-one after the other +together):\n%s", diff)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.shared == 0 {
		t.Error("no step verified drafts while prefilling: the test did not exercise BindRows with image rows")
	}
}
