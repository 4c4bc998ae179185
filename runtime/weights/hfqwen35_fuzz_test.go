package weights

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadHFQwen35Config: any config.json gives an *HFError or the qwen35
// metadata, never a panic; any tensor name maps to a blk.N name of a layer
// the config has, a global name, or an error.
func FuzzReadHFQwen35Config(f *testing.F) {
	f.Add([]byte(`{"architectures":["Qwen3_5ForConditionalGeneration"],"text_config":{"hidden_size":8,"num_hidden_layers":4,"intermediate_size":16,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"linear_conv_kernel_dim":4,"linear_key_head_dim":4,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_value_head_dim":4,"full_attention_interval":2,"mtp_num_hidden_layers":1,"layer_types":["linear_attention","full_attention","linear_attention","full_attention"],"rope_parameters":{"rope_type":"default","rope_theta":100,"partial_rotary_factor":0.5,"mrope_section":[1,1]}}}`),
		"mtp.layers.0.self_attn.q_proj.weight")
	f.Add([]byte(`{"text_config":{"rope_scaling":{"mrope_section":null}}}`), "model.language_model.layers.3.linear_attn.A_log")
	f.Fuzz(func(t *testing.T, config []byte, name string) {
		c := hfConfig{path: filepath.Join("d", HFConfigFile)}
		if json.Unmarshal(config, &c.m) != nil || c.m == nil {
			return
		}
		m, err := readHFQwen35Config(&c, c.path, "d", 1)
		if err != nil {
			var he *HFError
			if !errors.As(err, &he) {
				t.Fatalf("err %v is not an *HFError", err)
			}
			return
		}
		canon, vision := hfQwen35Canonical(name, m.layers)
		if vision {
			return
		}
		g, layer, err := m.ggufName(canon)
		if err == nil && (layer >= m.layers+m.mtp || layer >= 0 && !strings.HasPrefix(g, "blk.")) {
			t.Fatalf("%q maps to %q, layer %d of %d", name, g, layer, m.layers+m.mtp)
		}
	})
}
