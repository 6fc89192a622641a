package s3sink

// Streamed Parquet files: once an open Parquet file streams (its raw rows
// past streamAt, stream.go), a writer kept for it encodes its rows as they
// are appended, with the settings and the batches of encodeParquet
// (rowReader), so a row group goes out to the encoded bytes at each mark
// and the footer at the cut: the bytes are those encodeParquet gives for
// the same rows, whether a replay streams the file or not. The stream's
// parts are cut from the encoded bytes; the raw rows go back to the pool
// as the writer takes them. The file's size, its row groups and every
// cut are still counted in raw bytes (fb.size), as for a file held whole.
//
// The encoding runs on the consume path, under the sink's lock, as the
// rows' conversion does. Besides the encoded bytes not yet in parts, a
// streamed file holds its writer and the encoded pages of its open row
// group (at most its raw size): encodeReserve, held while it streams as an
// encoding at an upload holds it (in encodeBudget: encodeRoom keeps no
// room for it twice), though it never waits for the budget, and an
// upload's encoding always runs beside it.

// encodeOpen encodes the rows appended to p's open Parquet file since the
// last call, once the file streams; the first call starts its writer and
// points its stream at the encoded bytes. The raw chunks whose rows are
// written go back to the pool. The lock is held.
func (s *Sink) encodeOpen(p *partitionState) {
	fb := &p.open
	if s.pq == nil || fb.stream == nil || fb.pq == nil {
		return
	}
	e := fb.pq.enc
	if e == nil {
		e = &pqStream{reserve: s.encodeReserve()}
		// The writer is called with the lock held; its chunks are the
		// pool's largest, as chunkClass gives a streamed file.
		e.out = chunkWriter{s: s, locked: true, taken: 64}
		l := s.pqLayoutOf(p.topic)
		e.w = parquetWriter(&e.out, l)
		e.rows = newRowReader(e.w, l.columns(), s.free)
		s.holdWriter(e.reserve)
		fb.pq.enc = e
		fb.stream.chunks, fb.stream.size = &e.out.chunks, &e.out.size
	}
	if e.err != nil {
		return
	}
	if e.err = e.rows.read(fb.chunks); e.err != nil {
		s.log.Error("S3 sink could not encode a row of a parquet file it streams; the file fails at its cut", "topic", p.topic, "partition", p.partition, "error", e.err)
	}
	e.trim(fb)
}

// trim takes the raw chunks the writer is done with off fb (freed by
// rowReader.write).
func (e *pqStream) trim(fb *fileBuffer) {
	if k := e.rows.done; k > 0 {
		fb.chunks = fb.chunks[k:]
		e.rows.ci -= k
		e.rows.done = 0
	}
}

// encodeCut ends the encoding of fb, a streamed Parquet file just cut into
// f: its last rows, its last row group and the footer, and hands f the
// encoded bytes (marked encoded: its upload sends the rest of its parts).
// A writer that failed fails f for good, as encodeParquet does. The lock
// is held.
func (s *Sink) encodeCut(fb *fileBuffer, f *closedFile) {
	if fb.pq == nil || fb.pq.enc == nil {
		return
	}
	e := fb.pq.enc
	fb.pq.enc = nil
	err := e.err
	if err == nil {
		err = e.rows.finish(fb.chunks)
	}
	e.trim(fb)
	s.free(fb.chunks)
	fb.chunks = nil
	s.holdWriter(-e.reserve)
	// The stream's parts read the encoded bytes: f takes them, failed or not.
	f.chunks, f.size = e.out.chunks, e.out.size
	if err != nil {
		f.encodeErr = s.encodeFailed(f.key, err)
		return
	}
	f.encoded = true
}

// dropParquet lets go of fb's Parquet state. A streamed file's raw rows
// are freed, and fb keeps its encoded bytes, which its stream's parts
// read (dropFile hands them to dropStream). The lock is held.
func (s *Sink) dropParquet(fb *fileBuffer) {
	if fb.pq != nil && fb.pq.enc != nil {
		e := fb.pq.enc
		s.free(fb.chunks)
		fb.chunks = e.out.chunks
		s.holdWriter(-e.reserve)
	}
	fb.pq = nil
}

// holdWriter counts n more bytes held by a streamed file's writer, as an
// encoding; an upload's encoding waiting for the budget may start once
// they are given back. The lock is held.
func (s *Sink) holdWriter(n int64) {
	s.grow(int(n))
	s.encoding += n
	s.streamWriters += n
	if n < 0 {
		s.cond.Broadcast()
	}
}
