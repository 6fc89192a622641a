package s3sink

// A partition's group of open files, when path_template reads each record
// ({field:...}, {header:...}, {key}, {yyyy} ... {mm}): the files start at
// one record and are cut together, so a replay from the committed offset
// (the group's first) cuts the same files at the same records. p.open is
// the file of the last record; the others wait in p.idle by directory.

// groupSize returns the bytes of p's open files.
func groupSize(p *partitionState) int64 {
	n := p.open.size
	for _, fb := range p.idle {
		n += fb.size
	}
	return n
}

// openFileCount returns how many files p has open.
func openFileCount(p *partitionState) int {
	n := len(p.idle)
	if p.open.count > 0 {
		n++
	}
	return n
}

// switchTo makes the file of dir p's open one: the idle file of dir, or a
// new one. The file open until now waits in p.idle.
func switchTo(p *partitionState, dir []byte) {
	next := p.idle[string(dir)]
	if next != nil {
		delete(p.idle, next.dir)
	}
	switch {
	case p.open.count == 0 && next != nil:
		moveFile(&p.open, next)
		return
	case p.open.count == 0:
		p.open = fileBuffer{dir: string(dir)}
		return
	case next == nil:
		next = new(fileBuffer)
		moveFile(next, &p.open)
		p.open = fileBuffer{dir: string(dir)}
	default:
		var was fileBuffer
		moveFile(&was, &p.open)
		moveFile(&p.open, next)
		moveFile(next, &was)
	}
	if p.idle == nil {
		p.idle = map[string]*fileBuffer{}
	}
	p.idle[next.dir] = next
}

// moveFile moves the file of src to dst. A file that streams keeps its
// stream reading its bytes where they now are.
func moveFile(dst, src *fileBuffer) {
	*dst = *src
	if st := dst.stream; st != nil && st.chunks == &src.chunks {
		st.chunks, st.size = &dst.chunks, &dst.size
	}
}

// dropGroup lets go of p's open files without uploading them.
func (s *Sink) dropGroup(p *partitionState) {
	for _, fb := range p.idle {
		s.dropFile(fb)
	}
	clear(p.idle)
	s.dropFile(&p.open)
	p.group = groupState{cut: -1}
	s.m.openFiles.Set(float64(s.open))
}

func (s *Sink) dropFile(fb *fileBuffer) {
	if fb.count > 0 {
		s.open--
	}
	s.dropParquet(fb)
	if fb.stream != nil {
		s.dropStream(fb.stream, fb.chunks) // freed once its parts stop reading them
		fb.chunks = nil
	}
	s.free(fb.chunks)
	*fb = fileBuffer{}
}
