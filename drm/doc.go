// Package drm is a display controller under Linux's DRM/KMS
// (drivers/gpu/drm): one CRTC scanning out a framebuffer at its
// refresh rate through the DMA layer, framebuffers over imported
// dma-bufs, and atomic page flips that wait on fences.
//
// # Real counterparts
//
//   - drm_prime.c: File.PrimeFDToHandle is DRM_IOCTL_PRIME_FD_TO_HANDLE,
//     drm_gem_prime_import_dev: dma_buf_get(fd), dma_buf_attach of the
//     controller's own dma.Device and dma_buf_map_attachment, so the
//     sg table holds the controller's DMA addresses (IOVAs when its
//     device is behind an IOMMU domain). A controller that reads one
//     contiguous range (the drm_gem_dma helpers' rule, most SoC display
//     engines) refuses anything else with EINVAL
//     (drm_gem_dma_prime_import_sg_table). GEMClose is
//     DRM_IOCTL_GEM_CLOSE.
//   - drm_framebuffer.c: File.AddFB2 (DRM_IOCTL_MODE_ADDFB2, with
//     framebuffer_check's and drm_gem_fb_init_with_funcs' checks of
//     format, size, handles, pitches and offsets) and RmFB; formats
//     XRGB8888 and NV12.
//   - drm_atomic_uapi.c, drm_atomic_helper.c: File.AtomicCommit is a
//     non-blocking DRM_IOCTL_MODE_ATOMIC setting the primary plane's
//     FB_ID and IN_FENCE_FD and the CRTC's OUT_FENCE_PTR. Its tail runs
//     in a kernel worker: it waits for the in-fence (or, without one,
//     for the write fences of the framebuffer's dma-bufs:
//     drm_gem_plane_helper_prepare_fb's implicit sync) as
//     drm_atomic_helper_wait_for_fences does, arms the flip, and drops
//     the replaced framebuffer once the flip is done. A commit while the
//     previous one has not flipped is EBUSY (the stall check of
//     drm_atomic_helper_setup_commit for non-blocking commits).
//   - drm_vblank.c: a vblank counter stepping at the start of every
//     vertical blanking interval; an armed flip latches there, its
//     out-fence signals and its DRM_EVENT_FLIP_COMPLETE (File.ReadEvent)
//     is queued with the sequence and the vblank timestamp.
//   - The scanout engine: every refresh reads the latched framebuffer's
//     visible pixels in one transfer of the controller's dma.Device
//     (dma.Device.StartTransfer: translated by its IOMMU domain, seen by
//     the checker, a flow over the fabric) held to the frame's bytes
//     over the active period, so its bandwidth (width × height × bytes
//     per pixel × refresh: 2 GB/s for 3840x2160@60 XRGB8888) loads the
//     DRAM bus and the controller's port alongside every other master.
//     Bytes that arrive after the active period are an underrun.
//
// # Timing
//
// A Mode gives the totals with blanking and the pixel clock; CVTRB
// computes them with VESA's CVT reduced blanking (v1). Refresh k of an
// enable starts at Mode.FrameStart(k) (exact in pixel clocks, rounded
// down to the picosecond), its visible lines last Mode.Active, then
// vblank k+1 begins. A flip armed by then latches at that vblank and is
// on glass at the start of refresh k+1: Flip.OnGlass, the event's
// timestamp, DRM's vblank timestamp (the end of the vblank interval,
// when the first visible pixel of the new frame is scanned out). A
// commit's target is the first vblank after it; each vblank it latches
// later is a missed one (the previous frame shown again), counted per
// Flip and in Stats.
//
// # Simplifications
//
// One CRTC and one primary plane, no scaling (the framebuffer must be
// at least the mode's size; its top left is shown). The mode is fixed
// at New; Enable and Disable stand for the mode sets. Every commit is
// non-blocking and carries one plane; the ioctls cost the calling
// thread nothing beyond the mapping the import does. GEM handles are
// per File, one process's open of the device; framebuffer IDs are the
// device's. Every call and hardware step is an Event on Device.Hooks.
//
// # Invariants
//
// The plane holds a reference to the framebuffer latched, a pending
// commit to the one it will latch; a framebuffer's GEM objects, and
// with them the dma-buf attachments, go only when no ID, plane, commit
// or scanout in flight refers to it, and only in a thread (the caller
// or the commit worker), never from a hardware event. At most one
// commit is pending. The vblank counter steps once per refresh while
// the CRTC is on.
package drm
