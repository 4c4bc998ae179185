package engine

// SetDraftsChecked makes e call f, on its goroutine, with the drafts each
// verify step checked for a request (by Request.Tag). Call it before the
// first Submit.
func (e *Engine) SetDraftsChecked(f func(tag any, drafts []int32)) { e.draftsChecked = f }
