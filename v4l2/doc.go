// Package v4l2 is the capture side of a camera pipeline as Linux's
// Video4Linux2 gives it to programs: a camera (a CSI receiver and video
// input unit, or a PCIe capture card) and an ISP (a memory-to-memory
// image processor) as DMA devices of the platform, each a video node
// with videobuf2 queues.
//
// # Real counterparts
//
//   - include/uapi/linux/videodev2.h: Format (v4l2_pix_format), Buffer
//     (v4l2_buffer), RequestBuffers, ExportBuffer, the buffer types,
//     memory types and flags, the fourccs (RAW10/12 Bayer in 16-bit
//     containers and MIPI-packed, NV12). Adjust is what S_FMT/TRY_FMT do
//     (v4l2_fill_pixfmt's bytesperline and sizeimage, a driver's
//     clamping and stride alignment).
//   - drivers/media/common/videobuf2 (vb2-core, vb2-dma-sg): the queue
//     of each Device: REQBUFS (MMAP memory allocated and mapped for the
//     device now; DMABUF slots filled at QBUF by dma_buf_get, attach and
//     map_attachment, the mapping kept while the same buffer returns),
//     QUERYBUF, mmap, QBUF, DQBUF (the thread sleeps in virtual time),
//     STREAMON/STREAMOFF, EXPBUF (each call a new dma-buf of exporter
//     "videobuf2", the memory kept while the queue, a mapping or an
//     export holds it). MMAP buffers are synced for the device at QBUF
//     and for the CPU at DQBUF, as vb2's prepare and finish do; DMABUF
//     buffers are the importer's business (DMA_BUF_IOCTL_SYNC). Errors
//     are V4L2's errnos: EINVAL for a bad index, type or memory, EBUSY
//     for REQBUFS while streaming or a queue another file owns, EBADF
//     for a bad fd.
//   - drivers/staging/media/tegra-video (vi.c, csi.c) and PCIe capture
//     drivers: Capture. While streaming, a frame starts every period
//     (1/FrameRate, or longer when the platform device's line_rate
//     cannot carry a frame in a period); its lines arrive over the
//     period (a rolling readout, blanking not modelled) and the device
//     writes them into the oldest queued buffer by DMA, ChunkLines
//     lines a transfer, each as soon as its lines are in. A frame that
//     finds no buffer queued is dropped: counted, and a gap in the
//     sequence numbers, as V4L2 reports it.
//   - v4l2-mem2mem.c: ISP. A job takes one OUTPUT (RAW) and one CAPTURE
//     (NV12) buffer, waits for their fences, reads by DMA, computes for
//     pixels / pixel_rate, writes by DMA. The output buffer's timestamp,
//     sequence and timeline are copied to the capture buffer
//     (V4L2_BUF_FLAG_TIMESTAMP_COPY).
//   - Fences: the explicit in- and out-fences of the V4L2 fences
//     proposal (BufFlagInFence, BufFlagOutFence with sync_file fds),
//     never merged upstream, and implicit sync as drivers do it: the
//     fence of a buffer the hardware writes joins its dma-buf's
//     reservation object as a write fence (one it reads, as a read
//     fence) when the hardware starts on it (an ISP: once its waits
//     are over), and signals when it is done.
//
// Every byte a device moves goes through its dma.Device
// (StartTransfer), so its IOMMU domain translates it and the checker
// sees it. In payload mode a camera writes Pattern (a deterministic
// sensor pattern per sequence number) and the ISP writes Process of
// what it read, so a consumer can verify both; otherwise only versions
// move. FrameTimes gives each frame's readout start and end, when it
// was written, and the ISP's start, read and done, for a latency
// breakdown.
//
// # Simplifications
//
// Ioctls cost no CPU time of their own (only the DMA mappings and
// syncs they make). Exposure, blanking and the sensor's own pipeline
// are not modelled; the ISP does not overlap its read, processing and
// write; one job at a time; USERPTR memory is not supported; formats
// are single-planar.
//
// Every call and hardware event is an Event on Layer.Hooks (component
// "v4l2"); the system's HookAll includes them.
package v4l2
