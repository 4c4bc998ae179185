package tok

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// KeyChatTemplate is the GGUF metadata key holding a model's Jinja chat template.
const KeyChatTemplate = "tokenizer.chat_template"

// PlainTemplate is the chat template of models whose GGUF has none: each
// message on its own line as "role: content", then "assistant:" when a
// generation prompt is asked for. For example, a system and a user message
// render as
//
//	system: You are brief.
//	user: Hello
//	assistant:
const PlainTemplate = "{% for message in messages %}{{ message.role + ': ' + message.content + '\\n' }}{% endfor %}" +
	"{% if add_generation_prompt %}assistant:{% endif %}"

// Message is one chat message: its role ("system", "user", "assistant" ...)
// and its text.
type Message struct {
	Role    string
	Content string
	// Extra are further members of the message as templates see them, by
	// name, as JSON values (for example tool_calls, tool_call_id, name or
	// reasoning_content, as Hugging Face templates expect them). They do
	// not replace role or content.
	Extra map[string]json.RawMessage
}

// RenderOptions are the per-call inputs of ChatTemplate.Render.
type RenderOptions struct {
	// AddGenerationPrompt appends the header of an assistant turn, so the
	// model's continuation is the assistant's reply.
	AddGenerationPrompt bool
	// Now is the date templates see as date_string ("02 Jan 2006") and
	// through strftime_now; the zero value means time.Now().
	Now time.Time
	// Vars are further template variables by name, as JSON values (for
	// example tools, or the members of a request's chat_template_kwargs
	// such as enable_thinking). Objects keep their members' order. A Var
	// named as one of the variables Render sets (ReservedVars) is an
	// error.
	Vars map[string]json.RawMessage
}

// ReservedVars are the template variables Render sets itself; RenderOptions.Vars
// may not name them.
var ReservedVars = []string{"messages", "add_generation_prompt", "bos_token", "eos_token", "date_string"}

// ChatTemplate renders chat messages into a prompt with a model's Jinja
// template. It is immutable after construction and safe for concurrent use.
type ChatTemplate struct {
	src      string
	tmpl     *jinja.Template
	bos, eos string
}

// ErrTemplate is wrapped by errors of templates that fail to compile or
// render (including a template's own raise_exception).
var ErrTemplate = errors.New("chat template")

// NewChatTemplate compiles src, a Jinja chat template. bos and eos are the
// texts templates see as bos_token and eos_token ("" when the vocabulary has
// none).
func NewChatTemplate(src, bos, eos string) (*ChatTemplate, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return &ChatTemplate{src: src, tmpl: t, bos: bos, eos: eos}, nil
}

// ChatTemplateFromGGUF returns the chat template of f's tokenizer.chat_template,
// or PlainTemplate when f has none, with bos_token and eos_token taken from t.
func ChatTemplateFromGGUF(f *weights.File, t *Tokenizer) (*ChatTemplate, error) {
	src := PlainTemplate
	if f.Has(KeyChatTemplate) {
		s, err := f.String(KeyChatTemplate)
		if err != nil {
			return nil, fmt.Errorf("tok: %s: %w", KeyChatTemplate, err)
		}
		src = s
	}
	return NewChatTemplate(src, t.specialText(t.BOS()), t.specialText(t.EOS()))
}

// specialText is the text of token id, or "" for -1.
func (t *Tokenizer) specialText(id int32) string {
	if id < 0 || int(id) >= len(t.texts) {
		return ""
	}
	return t.texts[id]
}

// Source returns the template's Jinja source.
func (c *ChatTemplate) Source() string { return c.src }

// BOSText returns the text the template sees as bos_token.
func (c *ChatTemplate) BOSText() string { return c.bos }

// Render returns the prompt text for msgs. Errors wrap ErrTemplate and come
// from the template itself (for example a raise_exception on a role it does
// not support), so callers may report them as bad input.
func (c *ChatTemplate) Render(msgs []Message, o RenderOptions) (string, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		names := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			if k != "role" && k != "content" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			v, err := jsonValue(m.Extra[k])
			if err != nil {
				return "", fmt.Errorf("%w: message %d: %s: %w", ErrTemplate, i, k, err)
			}
			d.AsDict().Set(k, v)
		}
		list[i] = d
	}
	vars := map[string]jinja.Value{
		"messages":              jinja.NewList(list),
		"add_generation_prompt": jinja.NewBool(o.AddGenerationPrompt),
		"bos_token":             jinja.NewString(c.bos),
		"eos_token":             jinja.NewString(c.eos),
		"date_string":           jinja.NewString(now.Format("02 Jan 2006")),
	}
	for k, raw := range o.Vars {
		if _, ok := vars[k]; ok {
			return "", fmt.Errorf("%w: variable %q is set by the server", ErrTemplate, k)
		}
		v, err := jsonValue(raw)
		if err != nil {
			return "", fmt.Errorf("%w: variable %q: %w", ErrTemplate, k, err)
		}
		vars[k] = v
	}
	out, err := c.tmpl.RenderValues(vars)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return out, nil
}

// EncodeChat tokenizes a rendered chat prompt: special tokens are parsed,
// and BOS is prepended as Encode's addSpecial would, unless the rendered
// text already starts with it (templates such as Llama 3's write
// bos_token themselves).
func (t *Tokenizer) EncodeChat(rendered string) []int32 {
	return t.Encode(rendered, t.ChatAddsSpecial(rendered), true)
}

// ChatAddsSpecial reports whether EncodeChat adds the special tokens
// (BOS) to rendered: unless the template already wrote BOS.
func (t *Tokenizer) ChatAddsSpecial(rendered string) bool {
	bos := t.specialText(t.BOS())
	return !(bos != "" && strings.HasPrefix(rendered, bos))
}

// jsonValue converts one JSON value to a template value; objects keep
// their members' order and integers stay integers (as Python's json does).
func jsonValue(raw json.RawMessage) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err == nil {
		return jinja.Value{}, errors.New("more than one JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	t, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return jinja.NewList(items), nil
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(k.(string), v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return d, nil
		}
		return jinja.Value{}, fmt.Errorf("unexpected %v", t)
	default:
		return jinja.FromGoValue(t), nil
	}
}

// MessageEnds returns the byte offsets in text (msgs rendered with o) at
// which messages end: for each message i of the first one and the last
// maxMessageEnds-1, where rendering msgs[:i+1] without the generation
// prompt gives a prefix of text, that prefix's length; ascending. A
// template that renders an earlier message differently once later ones
// follow (a reasoning trace dropped, say) gives no offset for it.
func (c *ChatTemplate) MessageEnds(msgs []Message, text string, o RenderOptions) []int {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	o.AddGenerationPrompt = false
	var ends []int
	for i := range msgs {
		if i > 0 && i < len(msgs)-(maxMessageEnds-1) {
			continue
		}
		prefix, err := c.Render(msgs[:i+1], o)
		if err != nil || !strings.HasPrefix(text, prefix) || (len(ends) > 0 && len(prefix) <= ends[len(ends)-1]) {
			continue
		}
		ends = append(ends, len(prefix))
	}
	return ends
}

// maxMessageEnds bounds the renders MessageEnds does per request.
const maxMessageEnds = 16

// TokenOffsets maps byte offsets into text (ascending) to token offsets
// into ids, the tokens of text (EncodeChat's, a BOS it prepended
// included): the number of leading ids whose pieces spell exactly
// text[:offset]. An offset inside a token, or past the point where the
// pieces stop spelling text, is left out.
func (t *Tokenizer) TokenOffsets(ids []int32, text string, offsets []int) []int {
	skip := 0
	if len(ids) > 0 && ids[0] == t.BOS() && !strings.HasPrefix(text, t.specialText(t.BOS())) {
		skip = 1
	}
	var out []int
	at, next := 0, 0 // bytes of text spelled by ids[:k]; the next offset to find
	for k := skip; k <= len(ids) && next < len(offsets); k++ {
		for next < len(offsets) && offsets[next] < at {
			next++
		}
		if next < len(offsets) && offsets[next] == at {
			out = append(out, k)
			next++
		}
		if k == len(ids) || ids[k] < 0 || int(ids[k]) >= len(t.pieces) {
			break
		}
		p := t.pieces[ids[k]]
		if !strings.HasPrefix(text[at:], p) {
			break
		}
		at += len(p)
	}
	return out
}
