package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// Image is one image of a request's prompt, already encoded by the vision
// tower: NX x NY consecutive prompt rows from At, row-major over the token
// grid, whose input embeddings are Embeddings instead of their tokens'.
type Image struct {
	At     int // index in Request.Prompt of the image's first token
	NX, NY int // the token grid: tokens per row, rows
	// Embeddings are the tower's output rows [NX*NY, E], E the model's
	// embedding width.
	Embeddings []float32
	// Digest identifies the image's pixels (vision.RGB.Digest): the prefix
	// cache keys the image's rows by it, so the same image hits and
	// another never does.
	Digest [32]byte
}

// Tokens is the number of prompt rows the image takes.
func (im Image) Tokens() int { return im.NX * im.NY }

// positions is how many M-RoPE positions the image takes: the larger side
// of its grid (text after it resumes there).
func (im Image) positions() int { return max(im.NX, im.NY) }

// ImagesInput is the plan input that marks image rows, $in.images: a
// plan that reads it takes requests with images.
var ImagesInput = plan.Ref{Node: plan.InputNode, Port: node.BindImages}

// errNoImages is Submit's error for images sent to a plan that reads none.
var errNoImages = errors.New("engine: the graph does not read images (no vision.encode node on $in.images)")

// keyImages checks r.Images against the prompt and the model (in prompt
// order, inside it, apart, Embeddings of E-wide rows) and gives r a copy
// of its prompt whose image rows hold image keys: negative ids derived
// from each image's Digest and the row, which the prefix cache hashes like
// tokens and which no token id equals. The step feeds token 0 there
// (bindImages); the rows' embeddings replace it.
func (e *Engine) keyImages(r *Request) error {
	if len(r.Images) == 0 {
		return nil
	}
	if !e.images {
		return errNoImages
	}
	if r.Embed {
		return errors.New("engine: an embedding request cannot carry images")
	}
	prompt := slices.Clone(r.Prompt)
	next := 0
	for i, im := range r.Images {
		n := im.Tokens()
		switch {
		case im.NX < 1 || im.NY < 1:
			return fmt.Errorf("engine: image %d: a %dx%d token grid", i, im.NX, im.NY)
		case im.At < next || im.At+n > len(prompt):
			return fmt.Errorf("engine: image %d: rows %d..%d are not inside the prompt (%d tokens) after the previous image", i, im.At, im.At+n, len(prompt))
		case len(im.Embeddings) != n*e.model.Embed:
			return fmt.Errorf("engine: image %d: %d embedding values, want %d tokens x %d", i, len(im.Embeddings), n, e.model.Embed)
		}
		for j := range n {
			prompt[im.At+j] = imageKey(im.Digest, j)
		}
		next = im.At + n
	}
	r.Prompt = prompt
	return nil
}

// imageKey is the prompt id of row j of an image with digest d: a negative
// int32 from SHA-256(d, j).
func imageKey(d [32]byte, j int) int32 {
	var buf [36]byte
	copy(buf[:], d[:])
	binary.LittleEndian.PutUint32(buf[32:], uint32(j))
	h := sha256.Sum256(buf[:])
	return -1 - int32(binary.LittleEndian.Uint32(h[:])&0x7fffffff)
}

// imageRows are the buffers of one feed's image inputs (bindImages),
// owned by the engine and reused step after step: a step's feed and its
// feed with drafts inserted each have their own (Engine.feedImages,
// Engine.draftImages), as both are alive during the step.
type imageRows struct {
	mask  []int32    // [T] node.BindImages
	mrope [3][]int32 // [T] each, node.BindMRoPE
	emb   []float32  // [T, E] node.BindImageEmbeddings; zero on text rows
}

// bindImages binds the image inputs of b, step s's feed (or that feed with
// drafts inserted), on a plan that reads images, in buf's reused buffers:
// node.BindImages (1 on image rows), node.BindImageEmbeddings, and each
// row's M-RoPE components (node.BindMRoPE), by each row's sequence and
// position; image rows feed token 0 (node.FedToken: the tower's row
// replaces its embedding).
func (e *Engine) bindImages(s *step, b *exec.Batch, buf *imageRows) {
	n, width := len(b.Tokens), e.model.Embed
	buf.mask = resized(buf.mask, n)
	for i := range buf.mrope {
		buf.mrope[i] = resized(buf.mrope[i], n)
	}
	buf.emb = resized(buf.emb, n*width)
	mask, mrope, emb := buf.mask, buf.mrope, buf.emb
	for row, si := range b.RowSeq {
		r := e.reqs[s.work[si].Seq]
		pos := int(b.Positions[row])
		t, h, w, im, j := ropePosition(r.Images, pos)
		mrope[0][row], mrope[1][row], mrope[2][row] = t, h, w
		if im != nil {
			mask[row] = 1
			b.Tokens[row] = node.FedToken(b.Tokens[row], 0)
			copy(emb[row*width:(row+1)*width], im.Embeddings[j*width:(j+1)*width])
		}
	}
	if b.Ints == nil {
		b.Ints = map[string][]int32{}
	}
	if b.Floats == nil {
		b.Floats = map[string][]float32{}
	}
	b.Ints[node.BindImages] = mask
	for i, name := range node.BindMRoPE {
		b.Ints[name] = mrope[i]
	}
	b.Floats[node.BindImageEmbeddings] = emb
}

// resized is buf with length n and every element zero, reusing its
// storage when it holds n.
func resized[T int32 | float32](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	buf = buf[:n]
	clear(buf)
	return buf
}

// ropePosition returns the M-RoPE components (t, h, w) of the token at
// index pos of a sequence with images (in prompt order), and the image and
// its row when the token is one of an image's: an image whose first token
// is at position P in the model's numbering gives its token j (P, P +
// j/NX, P + j%NX), and text resumes at P + max(NX, NY); a text token at
// position p gives (p, p, p).
func ropePosition(images []Image, pos int) (t, h, w int32, im *Image, j int) {
	shift := 0 // positions saved by the images before pos: tokens - positions
	for i := range images {
		img := &images[i]
		if pos < img.At {
			break
		}
		if pos < img.At+img.Tokens() {
			j := pos - img.At
			p := int32(img.At - shift)
			return p, p + int32(j/img.NX), p + int32(j%img.NX), img, j
		}
		shift += img.Tokens() - img.positions()
	}
	p := int32(pos - shift)
	return p, p, p, nil, 0
}
