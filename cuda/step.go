package cuda

import (
	"fmt"
	"math"

	"github.com/ninfer/ninfer-go/runtime/exec"
)

// stepLayout places a step's int32 bindings in one device buffer, copied
// from the host before each run, so that a captured graph reads new inputs
// from the same addresses every step. For a graph recorded at Rows rows
// and LogitRows sampled rows on a KV cache of blocks blocks:
//
//	tokens    [Rows]       token ids; pad rows 0
//	positions [Rows]       position of each row in its sequence; pad rows 0
//	slots     [Rows]       KV slot the row's K and V go to: block*BlockTokens + position%BlockTokens
//	rowTables [Rows]       word offset in tables of the row's block table
//	reach     [Rows]       the last position of the row's sequence in the step, which a
//	                       non-causal attention's row attends up to; pad rows 0
//	logitRows [LogitRows]  rows whose logits are output; pad entries 0
//	tables    [blocks+1]   the block tables of the step's sequences, each once and cut
//	                       after the last block a row reads, then the pad table [blocks]
//	stateRead [Rows]       recurrent state slot the row reads (exec.Batch.StateRows); pad
//	                       rows, and every row of a batch without state slots, the pad slot
//	stateWrite [Rows]      recurrent state slot the row writes; the same pad slot
//	stageSlot [Stage]      with a bf16 state (Stage > 0): the slot each staging entry
//	                       holds; stateRead and stateWrite are then staging entries
//	stageWritten [Stage]   1 where a row writes the entry, else 0
//	stageCount [1]         the entries in use
//	floats    [...]        each float input (tensor.Builder.InputF32, a draft pass's
//	                       hidden states) as float bits, [rows, cols] row-major, the rows
//	                       past the batch's zero (Floats, added by addFloat)
//
// Pad rows (a step with fewer rows than its bucket) are token 0 at position
// 0 of a sequence whose only block is the pad block, id blocks, that the
// backend reserves past the engine's blocks: they compute harmless values
// that nothing reads; their recurrent state is the pad slot, StateSlots,
// past the engine's slots.
type stepLayout struct {
	Rows, LogitRows int
	Blocks          int // KV blocks of the engine; the pad block is Blocks
	// StateSlots is the engine's recurrent state slots (the pad slot is
	// StateSlots); Stateful says the graph has stateful ops, so a batch
	// must bind every sequence's slot.
	StateSlots int
	Stateful   bool
	// Stage is the staging entries of a bf16 state (stageSlots); 0 when
	// the state is f32 and the rows' slots are bound directly.
	Stage int
	// word offsets
	Tokens, Positions, Slots, RowTables, Reach, LogitRowsAt, Tables, StateRead, StateWrite int
	StageSlot, StageWritten, StageCount                                                    int
	Words                                                                                  int
	Floats                                                                                 []stepFloat
}

// stageSlots is the staging entries a step of rows rows needs on a state
// of slots slots (the pad slot besides): every slot a row reads or writes
// (a row reads one and writes one), at most every slot.
func stageSlots(rows, slots int) int { return min(2*rows+1, slots+1) }

// addStage places the staging list of a bf16 state of n entries at the end
// of the buffer.
func (l *stepLayout) addStage(n int) {
	l.Stage = n
	l.StageSlot, l.StageWritten, l.StageCount = l.Words, l.Words+n, l.Words+2*n
	l.Words += 2*n + 1
}

// stepFloat is a float input of the step buffer: Rows x Cols floats at
// word At, bound to exec.Batch.Floats[Name].
type stepFloat struct {
	Name           string
	Rows, Cols, At int
}

// addFloat places a float input of rows x cols at the end of the buffer
// and returns its word offset.
func (l *stepLayout) addFloat(name string, rows, cols int) int {
	at := l.Words
	l.Floats = append(l.Floats, stepFloat{Name: name, Rows: rows, Cols: cols, At: at})
	l.Words += rows * cols
	return at
}

func newStepLayout(rows, logitRows, blocks int) stepLayout {
	l := stepLayout{Rows: rows, LogitRows: logitRows, Blocks: blocks}
	l.Tokens = 0
	l.Positions = rows
	l.Slots = 2 * rows
	l.RowTables = 3 * rows
	l.Reach = 4 * rows
	l.LogitRowsAt = 5 * rows
	l.Tables = 5*rows + logitRows
	l.StateRead = l.Tables + blocks + 1
	l.StateWrite = l.StateRead + rows
	l.Words = l.StateWrite + rows
	return l
}

// Bytes is the size of the buffer.
func (l stepLayout) Bytes() int64 { return 4 * int64(l.Words) }

// stepPacker packs batches into a stepLayout, reusing its scratch.
type stepPacker struct {
	seqTable []int32 // [sequences] offset of each sequence's table; -1 until packed
	seqNeed  []int32 // [sequences] blocks of its table that rows read
	seqLast  []int32 // [sequences] the last position of its rows
	seqSeen  []int32 // [sequences] its rows so far (state snapshots)
	entry    []int32 // [state slots + 1] a slot's staging entry; -1 when not staged
}

// pack writes b into dst ([l.Words]) padded to l's shape, after checking
// every index a kernel will follow: row sequences, positions covered by
// block tables, block ids below l.Blocks, token ids below vocab and logit
// rows below the step's rows. It returns an error, and kernels never run on
// out-of-range indices.
func (p *stepPacker) pack(dst []int32, l stepLayout, b *exec.Batch, blockTokens, vocab int) error {
	rows, logitRows := len(b.Tokens), len(b.LogitRows)
	if len(dst) != l.Words {
		return fmt.Errorf("cuda: step buffer has %d words, layout needs %d", len(dst), l.Words)
	}
	if len(b.Positions) != rows || len(b.RowSeq) != rows {
		return fmt.Errorf("cuda: batch has %d tokens, %d positions, %d row sequences", rows, len(b.Positions), len(b.RowSeq))
	}
	if rows > l.Rows || logitRows > l.LogitRows {
		return fmt.Errorf("cuda: batch of %d rows (%d sampled) does not fit a graph recorded for %d (%d)", rows, logitRows, l.Rows, l.LogitRows)
	}
	if blockTokens <= 0 {
		return fmt.Errorf("cuda: kv block size %d", blockTokens)
	}
	p.seqTable = resize(p.seqTable, len(b.Tables))
	p.seqNeed = resize(p.seqNeed, len(b.Tables))
	p.seqLast = resize(p.seqLast, len(b.Tables))
	for s := range b.Tables {
		p.seqTable[s], p.seqNeed[s], p.seqLast[s] = -1, 0, 0
	}
	for t := range rows {
		s, pos := b.RowSeq[t], b.Positions[t]
		if s < 0 || int(s) >= len(b.Tables) {
			return fmt.Errorf("cuda: row %d: sequence %d out of range [0,%d)", t, s, len(b.Tables))
		}
		if pos < 0 {
			return fmt.Errorf("cuda: row %d: position %d", t, pos)
		}
		need := pos/int32(blockTokens) + 1
		if int(need) > len(b.Tables[s]) {
			return fmt.Errorf("cuda: row %d: position %d has no kv block (table of %d)", t, pos, len(b.Tables[s]))
		}
		p.seqNeed[s], p.seqLast[s] = max(p.seqNeed[s], need), max(p.seqLast[s], pos)
		if tok := b.Tokens[t]; tok < 0 || int(tok) >= vocab {
			return fmt.Errorf("cuda: row %d: token %d out of range [0,%d)", t, tok, vocab)
		}
	}
	tables := dst[l.Tables:]
	next := int32(0)
	for t := range rows {
		s := b.RowSeq[t]
		if p.seqTable[s] >= 0 {
			continue
		}
		need := p.seqNeed[s]
		if int(next+need) > l.Blocks {
			return fmt.Errorf("cuda: block tables of the step hold more than the cache's %d blocks", l.Blocks)
		}
		for i, blk := range b.Tables[s][:need] {
			if blk < 0 || int(blk) >= l.Blocks {
				return fmt.Errorf("cuda: sequence %d: kv block %d out of range [0,%d)", s, blk, l.Blocks)
			}
			tables[int(next)+i] = blk
		}
		p.seqTable[s] = next
		next += need
	}
	pad := int32(l.Blocks) // the pad table's offset and its one block id
	tables[pad] = int32(l.Blocks)
	for t := range l.Rows {
		if t >= rows {
			dst[l.Tokens+t], dst[l.Positions+t] = 0, 0
			dst[l.Slots+t], dst[l.RowTables+t] = int32(l.Blocks*blockTokens), pad
			dst[l.Reach+t] = 0
			continue
		}
		s, pos := b.RowSeq[t], b.Positions[t]
		dst[l.Tokens+t], dst[l.Positions+t] = b.Tokens[t], pos
		blk := tables[p.seqTable[s]+pos/int32(blockTokens)]
		dst[l.Slots+t] = blk*int32(blockTokens) + pos%int32(blockTokens)
		dst[l.RowTables+t], dst[l.Reach+t] = p.seqTable[s], p.seqLast[s]
	}
	if err := p.packState(dst, l, b); err != nil {
		return err
	}
	for _, f := range l.Floats {
		v, ok := b.Floats[f.Name]
		if !ok && rows > 0 {
			return fmt.Errorf("cuda: no binding for f32 input %q", f.Name)
		}
		if len(v)%f.Cols != 0 || len(v) > f.Rows*f.Cols {
			return fmt.Errorf("cuda: f32 input %q has %d values, graph recorded %dx%d", f.Name, len(v), f.Rows, f.Cols)
		}
		w := dst[f.At : f.At+f.Rows*f.Cols]
		for i, x := range v {
			w[i] = int32(math.Float32bits(x))
		}
		clear(w[len(v):])
	}
	for i := range l.LogitRows {
		if i >= logitRows {
			dst[l.LogitRowsAt+i] = 0
			continue
		}
		r := b.LogitRows[i]
		if r < 0 || int(r) >= rows {
			return fmt.Errorf("cuda: logit row %d out of range [0,%d)", r, rows)
		}
		dst[l.LogitRowsAt+i] = r
	}
	return nil
}

// packState writes the state slot each row reads and writes, as
// exec.Batch.StateRows, after checking every slot is below l.StateSlots and
// every verifying sequence has a snapshot slot per row; pad rows, and all
// rows of a batch without state slots, get the pad slot.
func (p *stepPacker) packState(dst []int32, l stepLayout, b *exec.Batch) error {
	rows := len(b.Tokens)
	pad := int32(l.StateSlots)
	if b.StateSlots == nil {
		if l.Stateful && rows > 0 {
			return fmt.Errorf("cuda: a graph with recurrent state needs the batch's state slots")
		}
		for t := range l.Rows {
			dst[l.StateRead+t], dst[l.StateWrite+t] = pad, pad
		}
		return p.packStage(dst, l)
	}
	if len(b.StateSlots) != len(b.Tables) {
		return fmt.Errorf("cuda: %d state slots for %d sequences", len(b.StateSlots), len(b.Tables))
	}
	inRange := func(s int, slot int32) error {
		if slot < 0 || slot >= pad {
			return fmt.Errorf("cuda: sequence %d: state slot %d out of range [0,%d)", s, slot, pad)
		}
		return nil
	}
	p.seqSeen = resize(p.seqSeen, len(b.Tables))
	for s, slot := range b.StateSlots {
		p.seqSeen[s] = 0
		if err := inRange(s, slot); err != nil {
			return err
		}
	}
	for t := range l.Rows {
		if t >= rows {
			dst[l.StateRead+t], dst[l.StateWrite+t] = pad, pad
			continue
		}
		s := b.RowSeq[t]
		read, write := b.StateSlots[s], b.StateSlots[s]
		if int(s) < len(b.StateSnapshots) && b.StateSnapshots[s] != nil {
			snaps, j := b.StateSnapshots[s], p.seqSeen[s]
			if int(j) >= len(snaps) {
				return fmt.Errorf("cuda: sequence %d: %d state snapshots for more rows", s, len(snaps))
			}
			if j > 0 {
				read = snaps[j-1]
			}
			write = snaps[j]
			if err := inRange(int(s), write); err != nil {
				return err
			}
		}
		if int(s) < len(b.StateFrom) && b.StateFrom[s] >= 0 && p.seqSeen[s] == 0 {
			read = b.StateFrom[s]
			if err := inRange(int(s), read); err != nil {
				return err
			}
		}
		p.seqSeen[s]++
		dst[l.StateRead+t], dst[l.StateWrite+t] = read, write
	}
	return p.packStage(dst, l)
}

// packStage renumbers the rows' state slots into staging entries when the
// state is staged (l.Stage > 0): each slot a row reads or writes gets the
// next entry, in row order, and the list records its slot and whether a
// row writes it.
func (p *stepPacker) packStage(dst []int32, l stepLayout) error {
	if l.Stage == 0 {
		return nil
	}
	p.entry = resize(p.entry, l.StateSlots+1)
	for i := range p.entry {
		p.entry[i] = -1
	}
	n := int32(0)
	stage := func(slot int32, write bool) (int32, error) {
		e := p.entry[slot]
		if e < 0 {
			if int(n) == l.Stage {
				return 0, fmt.Errorf("cuda: the step's rows touch more than the %d staged state slots", l.Stage)
			}
			e, n = n, n+1
			p.entry[slot] = e
			dst[l.StageSlot+int(e)], dst[l.StageWritten+int(e)] = slot, 0
		}
		if write {
			dst[l.StageWritten+int(e)] = 1
		}
		return e, nil
	}
	for t := range l.Rows {
		read, err := stage(dst[l.StateRead+t], false)
		if err != nil {
			return err
		}
		write, err := stage(dst[l.StateWrite+t], true)
		if err != nil {
			return err
		}
		dst[l.StateRead+t], dst[l.StateWrite+t] = read, write
	}
	clear(dst[l.StageSlot+int(n) : l.StageSlot+l.Stage])
	clear(dst[l.StageWritten+int(n) : l.StageWritten+l.Stage])
	dst[l.StageCount] = n
	return nil
}

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
