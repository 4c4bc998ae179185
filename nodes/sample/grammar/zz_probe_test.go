package grammar

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestZZProbeParse(t *testing.T) {
	var alts []string
	for i := range 100000 {
		b, _ := json.Marshal(fmt.Sprintf("item%06d", i))
		alts = append(alts, string(b))
	}
	src := "root ::= " + strings.Join(alts, " | ")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	t0 := time.Now()
	g, err := Parse(src)
	runtime.ReadMemStats(&ms)
	t.Logf("parse %v err %v alloc %d MB rules %d", time.Since(t0), err, (ms.TotalAlloc-before)>>20, len(g.rules))
	t0 = time.Now()
	st := g.NewCache().Start()
	t.Logf("start %v stacks %d", time.Since(t0), len(st.stacks))
	t0 = time.Now()
	st2 := st.AdvanceBytes([]byte("item0"))
	t.Logf("advance %v stacks %d", time.Since(t0), len(st2.stacks))
}
