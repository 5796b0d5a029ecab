package drm

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// gemObject is struct drm_gem_object of an imported dma-buf
// (import_attach set): the attachment of the controller and its sg
// table, held while a handle or a framebuffer refers to it.
type gemObject struct {
	buf     *dmabuf.Buffer
	att     *dmabuf.Attachment
	sgt     *dma.SGTable
	handles int // handles naming it (one per file here)
	fbRefs  int // framebuffers using it
	freed   bool
}

// PrimeFDToHandle is DRM_IOCTL_PRIME_FD_TO_HANDLE by thread p: the
// dma-buf behind fd in the file's process is imported as
// drm_gem_prime_import_dev does: dma_buf_get (EBADF for a descriptor
// the process does not hold), dma_buf_attach of the controller's
// device, dma_buf_map_attachment for DMA_BIDIRECTIONAL, so that the sg
// table holds the controller's own DMA addresses (IOVAs of its IOMMU
// domain when it has one). A controller without ScatterGather refuses
// a table that is not one contiguous range (EINVAL, as
// drm_gem_dma_prime_import_sg_table). Importing the same buffer again
// gives the same handle (drm_prime_lookup_buf_handle).
func (f *File) PrimeFDToHandle(p *sim.Proc, fd int) (uint32, error) {
	d := f.d
	ev := Event{Op: OpPrimeImport, Process: f.proc.Name()}
	fail := func(err error) (uint32, error) {
		err = fmt.Errorf("drm %s: prime fd %d to handle: %w", d.name, fd, err)
		d.emit(p, ev.fail(err))
		return 0, err
	}
	buf, err := d.bufs.Get(p, f.proc, fd)
	if err != nil {
		return fail(err)
	}
	ev.Buffer = buf.FileName()
	if h, ok := f.prime[buf]; ok {
		if err := buf.Put(p); err != nil {
			return fail(err)
		}
		ev.Handle = h
		d.emit(p, ev)
		return h, nil
	}
	att, err := buf.Attach(p, d.dev, dmabuf.AttachOptions{})
	if err != nil {
		buf.Put(p)
		return fail(err)
	}
	sgt, err := att.Map(p, dma.Bidirectional)
	if err == nil && !d.cfg.ScatterGather && dmabuf.ContiguousSize(sgt) < buf.Size() {
		att.Unmap(p, sgt, dma.Bidirectional)
		err = fmt.Errorf("%s is %d DMA segments, not contiguous for a controller without scatter-gather: %w", buf.FileName(), sgt.Nents, syscall.EINVAL)
	}
	if err != nil {
		att.Detach(p)
		buf.Put(p)
		return fail(err)
	}
	f.nextHandle++
	h := f.nextHandle
	f.handles[h] = &gemObject{buf: buf, att: att, sgt: sgt, handles: 1}
	f.prime[buf] = h
	ev.Handle = h
	d.emit(p, ev)
	return h, nil
}

// GEMClose is DRM_IOCTL_GEM_CLOSE: the handle goes; the object, and
// with it the mapping, attachment and dma-buf reference, goes when no
// framebuffer uses it either. EINVAL for an unknown handle.
func (f *File) GEMClose(p *sim.Proc, handle uint32) error {
	o, ok := f.handles[handle]
	ev := Event{Op: OpGEMClose, Process: f.proc.Name(), Handle: handle}
	if !ok {
		err := fmt.Errorf("drm %s: gem close %d: no such handle: %w", f.d.name, handle, syscall.EINVAL)
		f.d.emit(p, ev.fail(err))
		return err
	}
	ev.Buffer = o.buf.FileName()
	delete(f.handles, handle)
	delete(f.prime, o.buf)
	o.handles--
	f.d.emit(p, ev)
	return o.put(p)
}

// put frees the object when nothing refers to it: the importer's side
// of drm_gem_object_release (drm_prime_gem_destroy).
func (o *gemObject) put(p *sim.Proc) error {
	if o.handles > 0 || o.fbRefs > 0 || o.freed {
		return nil
	}
	o.freed = true
	if err := o.att.Unmap(p, o.sgt, dma.Bidirectional); err != nil {
		return err
	}
	if err := o.att.Detach(p); err != nil {
		return err
	}
	return o.buf.Put(p)
}

// spans are the controller's bus addresses of [off, off+n) of the
// object, split where its DMA segments are.
func (o *gemObject) spans(off, n uint64) []dma.Span {
	var out []dma.Span
	for _, sg := range o.sgt.SGL[:o.sgt.Nents] {
		if n == 0 {
			break
		}
		if off >= sg.DMALength {
			off -= sg.DMALength
			continue
		}
		k := min(sg.DMALength-off, n)
		out = append(out, dma.BusSpan(sg.DMAAddress+mem.DMAAddr(off), k))
		off, n = 0, n-k
	}
	return out
}
