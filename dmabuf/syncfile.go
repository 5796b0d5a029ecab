package dmabuf

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/sim"
)

// SyncFile is struct sync_file (drivers/dma-buf/sync_file.c): a fence
// as a file, for explicit synchronisation between processes and
// drivers. Its descriptors pass between processes like any file's; the
// fence (a fence array when it holds several) is dropped at release.
type SyncFile struct {
	l     *Layer
	ino   int
	name  string
	fence *Fence
	file  *kernel.OpenFile
}

// NewSyncFile is sync_file_create: a sync file for f, named name (the
// name SYNC_IOC_FILE_INFO reports).
func (l *Layer) NewSyncFile(name string, f *Fence) *SyncFile {
	l.syncs++
	return &SyncFile{l: l, ino: l.syncs, name: name, fence: f}
}

// FileName names the file: "sync_file:N".
func (s *SyncFile) FileName() string { return fmt.Sprintf("sync_file:%d", s.ino) }

// Name is the sync file's name.
func (s *SyncFile) Name() string { return s.name }

// Release drops the fence (sync_file_release).
func (s *SyncFile) Release(*sim.Proc) error { return nil }

// Fence is sync_file_get_fence: its fence (an array when merged).
func (s *SyncFile) Fence() *Fence { return s.fence }

// Status is the status SYNC_IOC_FILE_INFO reports: 0 while any fence
// is pending, 1 once all signalled, a negated errno if one failed.
func (s *SyncFile) Status() int { return s.fence.Status() }

// FD installs the sync file in proc (fd_install of sync_file->file).
func (s *SyncFile) FD(proc *kernel.Process) (int, error) {
	if s.file != nil {
		return -1, fmt.Errorf("sync_file %s: it has a file; dup or send a descriptor of it: %w", s.FileName(), syscall.EEXIST)
	}
	fd, err := proc.Install(s)
	if err != nil {
		return -1, fmt.Errorf("sync_file %s: %w", s.FileName(), err)
	}
	if s.file, err = proc.OpenFile("fd_install", fd); err != nil {
		return -1, err
	}
	return fd, nil
}

// File is the sync file's open file, nil until FD.
func (s *SyncFile) File() *kernel.OpenFile { return s.file }

// Wait is poll(2) on the sync file's descriptor with a timeout, as
// libsync's sync_wait does: p blocks until the fence signals; a timeout
// wraps ErrTimedOut (ETIME).
func (s *SyncFile) Wait(p *sim.Proc, timeout sim.Time) error {
	_, err := s.fence.WaitTimeout(p, timeout)
	if err != nil {
		return fmt.Errorf("sync_wait(%s): %w", s.FileName(), err)
	}
	return nil
}

// SyncFileGet is sync_file_fdget: the sync file behind fd in proc;
// EBADF for a descriptor proc does not have, EINVAL for another file.
func (l *Layer) SyncFileGet(proc *kernel.Process, fd int) (*SyncFile, error) {
	f, err := proc.File("sync_file_fdget", fd)
	if err != nil {
		return nil, fmt.Errorf("dmabuf: %w", err)
	}
	s, ok := f.(*SyncFile)
	if !ok || s.l != l {
		return nil, fmt.Errorf("dmabuf: sync_file_fdget(%d) in %s: %s is not a sync file: %w", fd, proc.Name(), f.FileName(), syscall.EINVAL)
	}
	return s, nil
}

// Merge is SYNC_IOC_MERGE on fd1 with fd2 in proc, by thread p: a new
// sync file named name, in a new descriptor, whose fence signals when
// both files' fences have. Fences of one context keep only the later;
// signalled fences are dropped (dma_fence_unwrap_merge), so merging
// signalled files gives a signalled stub.
func (l *Layer) Merge(p *sim.Proc, proc *kernel.Process, name string, fd1, fd2 int) (int, error) {
	a, err := l.SyncFileGet(proc, fd1)
	if err != nil {
		return -1, fmt.Errorf("SYNC_IOC_MERGE: %w", err)
	}
	b, err := l.SyncFileGet(proc, fd2)
	if err != nil {
		return -1, fmt.Errorf("SYNC_IOC_MERGE: %w", err)
	}
	s := l.NewSyncFile(name, l.merge(append(a.fence.Parts(), b.fence.Parts()...)))
	fd, err := s.FD(proc)
	l.emit(p, Event{Op: OpMerge, Process: proc.Name(), Fence: s.describe()}.fail(err))
	if err != nil {
		return -1, fmt.Errorf("SYNC_IOC_MERGE: %w", err)
	}
	return fd, nil
}

// merge is dma_fence_unwrap_merge over plain fences: pending ones, the
// latest per context, ordered by context; one fence is itself, none a
// stub, several an array.
func (l *Layer) merge(fences []*Fence) *Fence {
	var keep []*Fence
	for _, f := range fences {
		if f.signaled && f.errno == 0 {
			continue
		}
		i := slices.IndexFunc(keep, func(k *Fence) bool { return k.context == f.context })
		switch {
		case i < 0:
			keep = append(keep, f)
		case f.IsLater(keep[i]):
			keep[i] = f
		}
	}
	slices.SortStableFunc(keep, func(a, b *Fence) int { return cmp.Compare(a.context, b.context) })
	switch len(keep) {
	case 0:
		return l.Stub()
	case 1:
		return keep[0]
	}
	return l.NewArray(keep)
}

// describe lists the sync file's fences for an event.
func (s *SyncFile) describe() string {
	var parts []string
	for _, f := range s.fence.Parts() {
		parts = append(parts, f.String())
	}
	return strings.Join(parts, ", ")
}

// ExportSyncFile is DMA_BUF_IOCTL_EXPORT_SYNC_FILE on the buffer, by
// thread p of proc: a sync file, in a new descriptor, of the fences an
// access with flags must wait for (SyncRead: the writers; SyncWrite:
// the readers and writers), a signalled stub when there are none.
func (b *Buffer) ExportSyncFile(p *sim.Proc, proc *kernel.Process, flags uint64) (int, error) {
	if flags&^SyncRW != 0 || flags&SyncRW == 0 {
		return -1, fmt.Errorf("DMA_BUF_IOCTL_EXPORT_SYNC_FILE(%s, %#x): %w", b.FileName(), flags, syscall.EINVAL)
	}
	s := b.l.NewSyncFile("dma-buf", b.l.merge(b.resv.Fences(UsageRW(flags&SyncWrite != 0))))
	fd, err := s.FD(proc)
	if err != nil {
		err = fmt.Errorf("DMA_BUF_IOCTL_EXPORT_SYNC_FILE(%s): %w", b.FileName(), err)
	}
	b.l.emit(p, Event{Op: OpExportSyncFile, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Process: proc.Name(), Fence: s.describe()}.fail(err))
	return fd, err
}

// ImportSyncFile is DMA_BUF_IOCTL_IMPORT_SYNC_FILE: the fences of the
// sync file fd of proc join the buffer's reservation object, as
// writers (SyncWrite in flags) or readers, so that implicit-sync users
// of the buffer wait for them.
func (b *Buffer) ImportSyncFile(p *sim.Proc, proc *kernel.Process, flags uint64, fd int) error {
	if flags&^SyncRW != 0 || flags&SyncRW == 0 {
		return fmt.Errorf("DMA_BUF_IOCTL_IMPORT_SYNC_FILE(%s, %#x): %w", b.FileName(), flags, syscall.EINVAL)
	}
	s, err := b.l.SyncFileGet(proc, fd)
	if err != nil {
		err = fmt.Errorf("DMA_BUF_IOCTL_IMPORT_SYNC_FILE(%s): %w", b.FileName(), err)
		b.l.emit(p, Event{Op: OpImportSyncFile, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Process: proc.Name()}.fail(err))
		return err
	}
	u := UsageRead
	if flags&SyncWrite != 0 {
		u = UsageWrite
	}
	for _, f := range s.fence.Parts() {
		b.resv.add(f, u)
	}
	b.l.emit(p, Event{Op: OpImportSyncFile, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Process: proc.Name(), Fence: s.describe(), FenceIDs: ids(s.fence.Parts()), Usage: u})
	return nil
}
