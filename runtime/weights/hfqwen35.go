package weights

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// hfQwen35Classes are the config.json architectures of a Qwen3.5 hybrid
// text model (llama.cpp's Qwen3_5TextModel); the first one nests the text
// model's keys under text_config beside a vision_config.
var hfQwen35Classes = []string{"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"}

// hfQwen35DefaultSections are the M-RoPE sections the converter writes when
// rope_parameters has no mrope_section (_Qwen35MRopeMixin).
var hfQwen35DefaultSections = []int32{11, 11, 10, 0}

// hfQwen35LayerNames maps a Qwen3.5 layer's tensors after "model.layers.N."
// to GGUF names after "blk.N.", and says which kind of layer has them.
var hfQwen35LayerNames = map[string]struct {
	gguf   string
	linear bool // a Gated DeltaNet (linear_attention) layer's; else a gated-attention layer's
	both   bool // every layer's
}{
	"input_layernorm.weight":          {gguf: "attn_norm.weight", both: true},
	"post_attention_layernorm.weight": {gguf: "post_attention_norm.weight", both: true},
	"mlp.gate_proj.weight":            {gguf: "ffn_gate.weight", both: true},
	"mlp.up_proj.weight":              {gguf: "ffn_up.weight", both: true},
	"mlp.down_proj.weight":            {gguf: "ffn_down.weight", both: true},
	"self_attn.q_proj.weight":         {gguf: "attn_q.weight"},
	"self_attn.k_proj.weight":         {gguf: "attn_k.weight"},
	"self_attn.v_proj.weight":         {gguf: "attn_v.weight"},
	"self_attn.o_proj.weight":         {gguf: "attn_output.weight"},
	"self_attn.q_norm.weight":         {gguf: "attn_q_norm.weight"},
	"self_attn.k_norm.weight":         {gguf: "attn_k_norm.weight"},
	"linear_attn.in_proj_qkv.weight":  {gguf: "attn_qkv.weight", linear: true},
	"linear_attn.in_proj_z.weight":    {gguf: "attn_gate.weight", linear: true},
	"linear_attn.conv1d.weight":       {gguf: "ssm_conv1d.weight", linear: true},
	"linear_attn.dt_bias":             {gguf: "ssm_dt.bias", linear: true},
	"linear_attn.A_log":               {gguf: "ssm_a", linear: true},
	"linear_attn.in_proj_b.weight":    {gguf: "ssm_beta.weight", linear: true},
	"linear_attn.in_proj_a.weight":    {gguf: "ssm_alpha.weight", linear: true},
	"linear_attn.norm.weight":         {gguf: "ssm_norm.weight", linear: true},
	"linear_attn.out_proj.weight":     {gguf: "ssm_out.weight", linear: true},
}

// hfQwen35MTPNames maps the MTP block's tensors outside its layers, after
// "mtp.", to GGUF names after "blk.L." (L = num_hidden_layers).
var hfQwen35MTPNames = map[string]string{
	"fc.weight":                    "nextn.eh_proj.weight",
	"pre_fc_norm_embedding.weight": "nextn.enorm.weight",
	"pre_fc_norm_hidden.weight":    "nextn.hnorm.weight",
	"norm.weight":                  "nextn.shared_head_norm.weight",
}

// hfQwen35 is what OpenHF reads from a Qwen3.5 config.json.
type hfQwen35 struct {
	hfDims
	mtp, interval                     int // MTP layers (after hfDims.layers), full_attention_interval
	convK, kHeads, vHeads, kDim, vDim int // Gated DeltaNet sizes
	kv                                []KV
	layersKey, mtpKey, intervalKey    string
}

// linear reports whether layer l is a Gated DeltaNet layer: every layer of
// the trunk but each interval-th; MTP layers are gated-attention layers.
func (m *hfQwen35) linear(l int) bool { return l < m.layers && (l+1)%m.interval != 0 }

// readHFQwen35Config reads the Qwen3.5 config.json c (at path, in dir) into
// GGUF metadata as the converter writes it (Qwen3NextModel and
// _Qwen35MRopeMixin set_gguf_parameters); the MTP layer count comes from
// mtp_num_hidden_layers, else mtpFound (the mtp.layers.* the files hold).
func readHFQwen35Config(c *hfConfig, path, dir string, mtpFound int) (*hfQwen35, error) {
	if v, ok := c.raw("architectures"); ok {
		var classes []string
		if err := json.Unmarshal(v, &classes); err != nil {
			return nil, hfErr(path, "architectures", "not a list of strings")
		}
		if len(classes) > 0 && !slices.Contains(hfQwen35Classes, classes[0]) {
			return nil, hfErr(path, "architectures", "%q not supported for a Qwen3.5 model (want %s)", classes[0], strings.Join(hfQwen35Classes, " or "))
		}
	}
	tc := c
	if _, ok := c.raw("text_config"); ok {
		// The converter reads {**config, **text_config}: keys text_config
		// lacks come from the top level.
		text, err := c.object("text_config")
		if err != nil {
			return nil, err
		}
		tc = &hfConfig{path: text.path, prefix: text.prefix, m: maps.Clone(c.m)}
		maps.Copy(tc.m, text.m)
	}
	d, err := readHFDims(tc)
	if err != nil {
		return nil, err
	}
	m := &hfQwen35{hfDims: d}
	var errs []error
	for _, k := range []struct {
		dst *int
		key string
	}{{&m.convK, "linear_conv_kernel_dim"}, {&m.kDim, "linear_key_head_dim"}, {&m.kHeads, "linear_num_key_heads"},
		{&m.vHeads, "linear_num_value_heads"}, {&m.vDim, "linear_value_head_dim"}} {
		v, err := tc.int(k.key, -1, false)
		errs = append(errs, err)
		*k.dst = v
	}
	if m.interval, err = tc.int("full_attention_interval", 4, false); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// mtp_num_hidden_layers 0 or absent: the converter counts the MTP
	// layers the files hold.
	if v, ok := tc.raw("mtp_num_hidden_layers"); ok {
		var n int64
		if err := json.Unmarshal(v, &n); err != nil || n < 0 || n > 1<<16 {
			return nil, hfErr(path, tc.prefix+"mtp_num_hidden_layers", "%s is not an integer in [0, 65536]", v)
		}
		m.mtp = int(n)
	}
	if m.mtp == 0 {
		m.mtp = mtpFound
	}
	m.layersKey, m.intervalKey, m.mtpKey = tc.prefix+"num_hidden_layers", tc.prefix+"full_attention_interval", tc.prefix+"mtp_num_hidden_layers"
	if m.vHeads%m.kHeads != 0 {
		return nil, hfErr(path, tc.prefix+"linear_num_value_heads", "%d is not a multiple of linear_num_key_heads %d", m.vHeads, m.kHeads)
	}
	if m.layers+m.mtp > 1<<24 {
		return nil, hfErr(path, m.mtpKey, "%d MTP layers beside %d layers: too many", m.mtp, m.layers)
	}
	var recurrent []bool
	if v, ok := tc.raw("layer_types"); ok {
		var types []string
		if err := json.Unmarshal(v, &types); err != nil {
			return nil, hfErr(path, tc.prefix+"layer_types", "not a list of strings")
		}
		if len(types) != m.layers {
			return nil, hfErr(path, tc.prefix+"layer_types", "%d entries, want num_hidden_layers %d", len(types), m.layers)
		}
		for l, typ := range types {
			if lin := typ == "linear_attention"; lin != m.linear(l) || (!lin && typ != "full_attention") {
				return nil, hfErr(path, tc.prefix+"layer_types", "layer %d is %q: the model takes a full_attention layer every full_attention_interval (%d) layers and linear_attention layers between", l, typ, m.interval)
			}
			recurrent = append(recurrent, typ == "linear_attention")
		}
		recurrent = append(recurrent, make([]bool, m.mtp)...)
	}
	eps, hasEps, err := tc.float("rms_norm_eps")
	if err != nil {
		return nil, err
	}

	// Rope: rope_parameters (or rope_scaling) holds rope_theta,
	// partial_rotary_factor and mrope_section, each possibly at the top
	// level of the text config instead.
	ropeKey, rp := "rope_parameters", &hfConfig{path: path}
	for _, key := range []string{"rope_parameters", "rope_scaling"} {
		if _, ok := tc.raw(key); ok {
			if rp, err = tc.object(key); err != nil {
				return nil, err
			}
			ropeKey = key
			break
		}
	}
	theta, hasTheta, err := rp.float("rope_theta")
	if err != nil {
		return nil, err
	}
	if !hasTheta {
		if theta, hasTheta, err = tc.float("rope_theta"); err != nil {
			return nil, err
		}
	}
	partial, hasPartial, err := rp.float("partial_rotary_factor")
	if err != nil {
		return nil, err
	}
	if !hasPartial {
		if partial, hasPartial, err = tc.float("partial_rotary_factor"); err != nil {
			return nil, err
		}
	}
	if !hasPartial {
		partial = 0.25
	}
	ropeDim := int(float64(m.headDim) * partial)
	if ropeDim <= 0 || ropeDim > m.headDim || ropeDim%2 != 0 {
		return nil, hfErr(path, tc.prefix+ropeKey+".partial_rotary_factor", "%g of head_dim %d gives %d rotary dimensions, want an even number in [2, %d]", partial, m.headDim, ropeDim, m.headDim)
	}
	for _, key := range []string{"rope_type", "type"} {
		if v, ok := rp.raw(key); ok {
			var typ string
			if err := json.Unmarshal(v, &typ); err != nil {
				return nil, hfErr(path, tc.prefix+ropeKey+"."+key, "%s is not a string", v)
			}
			if typ != "default" {
				return nil, hfErr(path, tc.prefix+ropeKey+"."+key, "%q not supported for qwen3_5 (supported: default)", typ)
			}
			break
		}
	}
	sections := hfQwen35DefaultSections
	if v, ok := rp.raw("mrope_section"); ok {
		var s []int32
		if err := json.Unmarshal(v, &s); err != nil || len(s) == 0 || slices.ContainsFunc(s, func(x int32) bool { return x < 0 }) {
			return nil, hfErr(path, tc.prefix+ropeKey+".mrope_section", "%s is not a list of non-negative integers", v)
		}
		for len(s) < 4 {
			s = append(s, 0)
		}
		sections = s[:4]
	}

	const a = "qwen35"
	m.kv = slices.Concat([]KV{{"general.architecture", Str(a)}, {"general.name", Str(filepath.Base(filepath.Clean(dir)))}},
		m.kvs(a, m.layers+m.mtp), []KV{
			{a + ".rope.dimension_count", U32(uint32(ropeDim))},
			{a + ".rope.dimension_sections", Arr(sections)},
			{a + ".ssm.conv_kernel", U32(uint32(m.convK))},
			{a + ".ssm.state_size", U32(uint32(m.kDim))},
			{a + ".ssm.group_count", U32(uint32(m.kHeads))},
			{a + ".ssm.time_step_rank", U32(uint32(m.vHeads))},
			{a + ".ssm.inner_size", U32(uint32(m.vDim * m.vHeads))},
			{a + ".full_attention_interval", U32(uint32(m.interval))},
		})
	if hasTheta {
		m.kv = append(m.kv, KV{a + ".rope.freq_base", F32(float32(theta))})
	}
	if hasEps {
		m.kv = append(m.kv, KV{a + ".attention.layer_norm_rms_epsilon", F32(float32(eps))})
	}
	if recurrent != nil {
		m.kv = append(m.kv, KV{a + ".attention.recurrent_layers", Arr(recurrent)})
	}
	if m.mtp > 0 {
		m.kv = append(m.kv, KV{a + ".nextn_predict_layers", U32(uint32(m.mtp))})
	}
	return m, nil
}

// hfQwen35Canonical returns the name the converter maps a Qwen3.5 tensor
// by (filter_tensors): "language_model." dropped, the MTP block's layers
// numbered after the trunk's (mtp.layers.I -> model.layers.layers+I) and
// its other tensors under mtp. kept; vision false for the tower's tensors,
// which the text model leaves out.
func hfQwen35Canonical(name string, layers int) (canon string, vision bool) {
	name = strings.Replace(name, "language_model.", "", 1)
	if strings.HasPrefix(name, "model.visual.") || strings.HasPrefix(name, "visual.") {
		return "", true
	}
	if rest, ok := strings.CutPrefix(name, "model.mtp."); ok {
		name = "mtp." + rest
	}
	rest, ok := strings.CutPrefix(name, "mtp.")
	if !ok {
		return name, false
	}
	name = rest
	if rest, ok := strings.CutPrefix(name, "layers."); ok {
		num, suffix, found := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(num); found && err == nil && i >= 0 && strconv.Itoa(i) == num {
			return fmt.Sprintf("model.layers.%d.%s", layers+i, suffix), false
		}
	}
	return "mtp." + name, false
}

// ggufName returns the GGUF name of the canonical Hugging Face name, and
// its layer (-1 outside the layers), or an error saying why it has none.
func (m *hfQwen35) ggufName(canon string) (string, int, error) {
	switch canon {
	case "model.embed_tokens.weight":
		return "token_embd.weight", -1, nil
	case "model.norm.weight":
		return "output_norm.weight", -1, nil
	case "lm_head.weight":
		return "output.weight", -1, nil
	}
	if rest, ok := strings.CutPrefix(canon, "mtp."); ok {
		if g, ok := hfQwen35MTPNames[rest]; ok && m.mtp > 0 {
			return fmt.Sprintf("blk.%d.%s", m.layers, g), m.layers, nil
		}
		return "", -1, fmt.Errorf("tensor not known for qwen3_5 (%s %d)", m.mtpKey, m.mtp)
	}
	rest, ok := strings.CutPrefix(canon, "model.layers.")
	num, suffix, found := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !ok || !found || err != nil || l < 0 || strconv.Itoa(l) != num {
		return "", -1, fmt.Errorf("tensor not known for qwen3_5")
	}
	n, known := hfQwen35LayerNames[suffix]
	switch {
	case !known:
		return "", l, fmt.Errorf("tensor not known for qwen3_5")
	case l >= m.layers+m.mtp:
		return "", l, fmt.Errorf("layer %d, but %s is %d and %s %d", l, m.layersKey, m.layers, m.mtpKey, m.mtp)
	case !n.both && n.linear != m.linear(l):
		kind := "a gated-attention"
		if m.linear(l) {
			kind = "a Gated DeltaNet (linear_attention)"
		}
		return "", l, fmt.Errorf("layer %d is %s layer (%s %d), which has no such tensor", l, kind, m.intervalKey, m.interval)
	}
	return fmt.Sprintf("blk.%d.%s", l, n.gguf), l, nil
}

// expectShape returns the PyTorch-order shape config.json implies for the
// GGUF tensor name (vocab-sized dimensions as given by rows when
// config.json has no vocab_size).
func (m *hfQwen35) expectShape(name string, rows int) []int {
	vocab := m.vocab
	if vocab == 0 {
		vocab = rows
	}
	qkv := 2*m.kHeads*m.kDim + m.vHeads*m.vDim
	switch name {
	case "token_embd.weight", "output.weight":
		return []int{vocab, m.embed}
	case "output_norm.weight":
		return []int{m.embed}
	}
	_, suffix, _ := strings.Cut(strings.TrimPrefix(name, "blk."), ".")
	switch suffix {
	case "attn_norm.weight", "post_attention_norm.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight":
		return []int{m.embed}
	case "nextn.eh_proj.weight":
		return []int{m.embed, 2 * m.embed}
	case "ffn_gate.weight", "ffn_up.weight":
		return []int{m.ffn, m.embed}
	case "ffn_down.weight":
		return []int{m.embed, m.ffn}
	case "attn_q.weight": // query and its output gate, per head
		return []int{2 * m.heads * m.headDim, m.embed}
	case "attn_k.weight", "attn_v.weight":
		return []int{m.kvHeads * m.headDim, m.embed}
	case "attn_output.weight":
		return []int{m.embed, m.heads * m.headDim}
	case "attn_q_norm.weight", "attn_k_norm.weight":
		return []int{m.headDim}
	case "attn_qkv.weight":
		return []int{qkv, m.embed}
	case "attn_gate.weight":
		return []int{m.vHeads * m.vDim, m.embed}
	case "ssm_conv1d.weight":
		return []int{qkv, 1, m.convK}
	case "ssm_dt.bias", "ssm_a":
		return []int{m.vHeads}
	case "ssm_beta.weight", "ssm_alpha.weight":
		return []int{m.vHeads, m.embed}
	case "ssm_norm.weight":
		return []int{m.vDim}
	case "ssm_out.weight":
		return []int{m.embed, m.vHeads * m.vDim}
	}
	return nil
}

// tensor converts st (from file) to the GGUF
// tensor name as the converter does: RMSNorm weights (all but the Gated
// DeltaNet's output norm) stored as 1 + w, A_log as -exp(A_log), the conv1d
// kernel squeezed to [channels, kernel] and F32, and, when there are more
// value heads than key heads, the value heads reordered from grouped by key
// head to tiled (_LinearAttentionVReorderBase) in every tensor that has
// them. 1-D tensors become F32; the arithmetic is done in the precision the
// converter does it in (float32, or float16 for F16 tensors).
func (m *hfQwen35) tensor(st *SafeTensor, file, name string) (*Tensor, error) {
	rows := 0
	if len(st.Shape) > 0 {
		rows = st.Shape[0]
	}
	if want := m.expectShape(name, rows); !slices.Equal(st.Shape, want) {
		return nil, hfErr(file, st.Name, "shape %v, want %v from %s", st.Shape, want, HFConfigFile)
	}
	_, suffix, _ := strings.Cut(strings.TrimPrefix(name, "blk."), ".")
	src := st
	if suffix == "ssm_conv1d.weight" { // [C, 1, K] squeezed
		sq := *st
		sq.Shape = []int{st.Shape[0], st.Shape[2]}
		src = &sq
	}
	t, err := hfGGUFTensor(src, file, name)
	if err != nil {
		return nil, err
	}
	if suffix == "ssm_conv1d.weight" && t.DType != tensor.F32 {
		v, err := t.Float32s()
		if err != nil {
			return nil, hfErr(file, st.Name, "%v", err)
		}
		t.DType, t.Data = tensor.F32, f32Data(v)
	}
	if r := m.vHeads / m.kHeads; r > 1 {
		t.Data = m.tileVHeads(t, suffix, m.kHeads, r)
	}
	plusOne := hfQwen35PlusOne(name)
	if plusOne || suffix == "ssm_a" {
		f16 := st.DType == "F16"
		v, err := t.Float32s()
		if err != nil {
			return nil, hfErr(file, st.Name, "%v", err)
		}
		for i, x := range v {
			if plusOne {
				x++
			} else {
				x = -float32(math.Exp(float64(x)))
			}
			if f16 {
				x = tensor.F16ToF32(tensor.F32ToF16(x))
			}
			v[i] = x
		}
		t.Data = f32Data(v)
	}
	if len(t.Data) > 0 && !aligned(t.Data) {
		t.Data = alignedCopy(t.Data)
	}
	return t, nil
}

// hfQwen35PlusOne reports whether the converter stores the GGUF tensor
// name as 1 + w: the RMSNorm weights ("norm.weight" in the names it maps
// from, the MTP block's included), all but the Gated DeltaNet's output norm.
func hfQwen35PlusOne(name string) bool {
	return strings.HasSuffix(name, "norm.weight") && !strings.HasSuffix(name, ".ssm_norm.weight")
}

// tileVHeads returns t's data (the GGUF tensor of suffix) with its value
// heads, k groups of r, in tiled order, or its data unchanged for a tensor
// without them: head j of group kk (kk*r + j) goes to j*k + kk. With k the
// key heads it is the converter's reorder; with k and r swapped, its
// inverse.
func (m *hfQwen35) tileVHeads(t *Tensor, suffix string, k, r int) []byte {
	esz := t.DType.BlockBytes() // float types: blocks of 1
	rowBytes := esz             // one PyTorch row: an element of a 1-D tensor
	if len(t.Shape) > 1 {
		rowBytes = t.Shape[0] * esz
	}
	switch suffix {
	case "attn_qkv.weight", "ssm_conv1d.weight": // rows after q and k
		qk := 2 * m.kHeads * m.kDim * rowBytes
		out := slices.Clone(t.Data)
		tileUnits(out[qk:], t.Data[qk:], rowBytes*m.vDim, k, r)
		return out
	case "attn_gate.weight":
		return tileUnits(make([]byte, len(t.Data)), t.Data, rowBytes*m.vDim, k, r)
	case "ssm_beta.weight", "ssm_alpha.weight", "ssm_dt.bias", "ssm_a":
		return tileUnits(make([]byte, len(t.Data)), t.Data, rowBytes, k, r)
	case "ssm_out.weight": // columns, in each row
		out := make([]byte, len(t.Data))
		for row := 0; row < len(t.Data); row += rowBytes {
			tileUnits(out[row:row+rowBytes], t.Data[row:row+rowBytes], esz*m.vDim, k, r)
		}
		return out
	}
	return t.Data
}

// tileUnits writes src, k*r units of unit bytes grouped (unit k*r + j at
// kk*r + j), to dst in tiled order (j*k + kk), and returns dst.
func tileUnits(dst, src []byte, unit, k, r int) []byte {
	for kk := range k {
		for j := range r {
			from, to := (kk*r+j)*unit, (j*k+kk)*unit
			copy(dst[to:to+unit], src[from:from+unit])
		}
	}
	return dst
}

// checkComplete checks that f has every tensor the model needs and names
// the first one missing (by its Hugging Face name); like hfModel's, the
// check stops there.
func (m *hfQwen35) checkComplete(f *File, file string) error {
	has := func(g string) bool { _, err := f.Tensor(g); return err == nil }
	for hf, g := range map[string]string{"model.language_model.embed_tokens.weight": "token_embd.weight", "model.language_model.norm.weight": "output_norm.weight"} {
		if !has(g) {
			return hfErr(file, hf, "missing: the model needs it")
		}
	}
	names := slices.Sorted(maps.Keys(hfQwen35LayerNames))
	for l := range m.layers + m.mtp {
		held, need := 0, 0
		var missing string
		for _, s := range names {
			n := hfQwen35LayerNames[s]
			if !n.both && n.linear != m.linear(l) {
				continue
			}
			need++
			if has(fmt.Sprintf("blk.%d.%s", l, n.gguf)) {
				held++
			} else if missing == "" {
				missing = fmt.Sprintf("model.language_model.layers.%d.%s", l, s)
				if l >= m.layers {
					missing = fmt.Sprintf("mtp.layers.%d.%s", l-m.layers, s)
				}
			}
		}
		switch {
		case held == need:
		case held == 0 && l < m.layers:
			return hfErr(file, missing, "missing: the model needs it (%s is %d, the files hold layers 0 to %d)", m.layersKey, m.layers, l-1)
		case held == 0:
			return hfErr(file, missing, "missing: the model needs it (%s is %d)", m.mtpKey, m.mtp)
		default:
			return hfErr(file, missing, "missing: the model needs it")
		}
	}
	if m.mtp > 0 {
		for _, hf := range slices.Sorted(maps.Keys(hfQwen35MTPNames)) {
			if !has(fmt.Sprintf("blk.%d.%s", m.layers, hfQwen35MTPNames[hf])) {
				return hfErr(file, "mtp."+hf, "missing: the model needs it (%s is %d)", m.mtpKey, m.mtp)
			}
		}
	}
	return nil
}

// openHFQwen35 is OpenHF for a Qwen3.5 folder whose config.json is c.
func openHFQwen35(dir string, c *hfConfig, o HFOptions) (*File, error) {
	// The MTP layer count is read before the config is: when config.json
	// has no mtp_num_hidden_layers, the converter counts the mtp.layers.*
	// it finds. The metadata is then added to the File.
	f, srcs, err := openHFFolder(dir, nil, o)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	mtpFound := 0
	for _, s := range srcs {
		if canon, vision := hfQwen35Canonical(s.st.Name, 0); !vision {
			if rest, isLayer := strings.CutPrefix(canon, "model.layers."); isLayer && strings.Contains(s.st.Name, "mtp.") {
				num, _, _ := strings.Cut(rest, ".")
				if i, err := strconv.Atoi(num); err == nil && i < 1<<16 {
					mtpFound = max(mtpFound, i+1)
				}
			}
		}
	}
	m, err := readHFQwen35Config(c, c.path, dir, mtpFound)
	if err != nil {
		return nil, err
	}
	if err := f.addKV(m.kv); err != nil {
		return nil, err
	}
	for _, s := range srcs {
		if hfIgnored(s.st.Name) {
			continue
		}
		canon, vision := hfQwen35Canonical(s.st.Name, m.layers)
		if vision {
			continue
		}
		name, _, err := m.ggufName(canon)
		if err != nil {
			return nil, hfErr(s.file, s.st.Name, "%v", err)
		}
		t, err := m.tensor(s.st, s.file, name)
		if err != nil {
			return nil, err
		}
		f.tensors[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	file := filepath.Join(dir, HFSafetensorsFile)
	if hfSharded(dir) {
		file = filepath.Join(dir, HFIndexFile)
	}
	if err := m.checkComplete(f, file); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}
