package tok

import (
	"errors"
	"fmt"
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
}

// RenderOptions are the per-call inputs of ChatTemplate.Render.
type RenderOptions struct {
	// AddGenerationPrompt appends the header of an assistant turn, so the
	// model's continuation is the assistant's reply.
	AddGenerationPrompt bool
	// Now is the date templates see as date_string ("02 Jan 2006") and
	// through strftime_now; the zero value means time.Now().
	Now time.Time
}

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
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	out, err := c.tmpl.Render(map[string]any{
		"messages":              list,
		"add_generation_prompt": o.AddGenerationPrompt,
		"bos_token":             c.bos,
		"eos_token":             c.eos,
		"date_string":           now.Format("02 Jan 2006"),
	})
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
	bos := t.specialText(t.BOS())
	addSpecial := !(bos != "" && strings.HasPrefix(rendered, bos))
	return t.Encode(rendered, addSpecial, true)
}
