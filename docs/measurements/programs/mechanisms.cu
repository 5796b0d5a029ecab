// mechanisms.cu: the measurements behind the h200-pcie model's pageable,
// unified-memory and PCIe-efficiency mechanisms (issue 5). Not part of the Go
// build; run on a machine with a GPU:
//
//	nvcc -O2 -std=c++17 -Xcompiler -mavx2 -o mechanisms mechanisms.cu
//	./mechanisms spin        # default scheduling (the driver spin-waits)
//	./mechanisms blocking    # cudaDeviceScheduleBlockingSync
//
// Every line of output is "section key=value ...", one measurement a line.
// CPU time is split into user and system time with getrusage, for the calling
// thread (RUSAGE_THREAD) and the whole process (RUSAGE_SELF): memcpy staging
// is user time, pinning pages and the UVM driver's work are system time.
// ru_minflt counts the CPU page faults a step took.
#include <cuda_runtime.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <immintrin.h>

#define CK(x)                                                                 \
	do {                                                                      \
		cudaError_t e_ = (x);                                                 \
		if (e_ != cudaSuccess) {                                              \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,        \
			        cudaGetErrorString(e_));                                  \
			exit(1);                                                          \
		}                                                                     \
	} while (0)

static double now() {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double tv(struct timeval t) { return t.tv_sec + t.tv_usec * 1e-6; }

// span records wall time and rusage of the thread and the process.
struct span {
	double w;
	struct rusage th, pr;
	void start() {
		getrusage(RUSAGE_THREAD, &th);
		getrusage(RUSAGE_SELF, &pr);
		w = now();
	}
	// print writes the span's figures after the caller's key=value prefix.
	void stop(const char *section, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
};

static int threads() {
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d) return -1;
	while (struct dirent *e = readdir(d))
		if (e->d_name[0] != '.') n++;
	closedir(d);
	return n;
}

#include <stdarg.h>
void span::stop(const char *section, const char *fmt, ...) {
	double w1 = now();
	struct rusage th1, pr1;
	getrusage(RUSAGE_THREAD, &th1);
	getrusage(RUSAGE_SELF, &pr1);
	printf("%s ", section);
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" wall_s=%.6f thr_user_s=%.6f thr_sys_s=%.6f proc_user_s=%.6f proc_sys_s=%.6f thr_minflt=%ld proc_minflt=%ld thr_nvcsw=%ld threads=%d\n",
	       w1 - w, tv(th1.ru_utime) - tv(th.ru_utime), tv(th1.ru_stime) - tv(th.ru_stime),
	       tv(pr1.ru_utime) - tv(pr.ru_utime), tv(pr1.ru_stime) - tv(pr.ru_stime),
	       th1.ru_minflt - th.ru_minflt, pr1.ru_minflt - pr.ru_minflt, th1.ru_nvcsw - th.ru_nvcsw, threads());
	fflush(stdout);
}

static void touch(void *p, size_t n) { memset(p, 1, n); }

static const size_t MiB = 1 << 20;

static void memcpys() {
	size_t big = 1024 * MiB;
	char *a = (char *)malloc(big), *b = (char *)malloc(big), *pin;
	CK(cudaMallocHost((void **)&pin, big));
	touch(a, big);
	touch(b, big);
	touch(pin, big);
	for (int r = 0; r < 3; r++) {
		span s;
		s.start();
		memcpy(b, a, big);
		s.stop("memcpy", "what=pageable_to_pageable bytes=%zu rep=%d", big, r);
		s.start();
		memcpy(pin, a, big);
		s.stop("memcpy", "what=pageable_to_pinned bytes=%zu rep=%d", big, r);
		s.start();
		memcpy(a, pin, big);
		s.stop("memcpy", "what=pinned_to_pageable bytes=%zu rep=%d", big, r);
	}
	// The staging copies: a big pageable buffer through a small ring of two
	// pinned chunks, as the driver stages a pageable copy. The ring stays in
	// the caches; the big buffer does not.
	size_t chunks[] = {64 << 10, 256 << 10, 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB};
	for (size_t c : chunks) {
		for (int r = 0; r < 2; r++) {
			span s;
			s.start();
			for (size_t off = 0, k = 0; off < big; off += c, k++) memcpy(pin + (k & 1) * c, a + off, c);
			s.stop("staging", "dir=h2d chunk=%zu bytes=%zu rep=%d", c, big, r);
			s.start();
			for (size_t off = 0, k = 0; off < big; off += c, k++) memcpy(b + off, pin + (k & 1) * c, c);
			s.stop("staging", "dir=d2h chunk=%zu bytes=%zu rep=%d", c, big, r);
		}
	}
	// d2h staging whose chunks the GPU has just written by DMA: is the memcpy
	// out of them faster (the DMA write left the lines in the LLC)?
	char *dev;
	CK(cudaMalloc((void **)&dev, 8 * MiB));
	CK(cudaMemset(dev, 7, 8 * MiB));
	for (size_t c : chunks) {
		double cp = 0, dma = 0;
		size_t n = 256 * MiB;
		for (size_t off = 0, k = 0; off < n; off += c, k++) {
			double t0 = now();
			CK(cudaMemcpy(pin + (k & 1) * c, dev, c, cudaMemcpyDeviceToHost));
			double t1 = now();
			memcpy(b + off, pin + (k & 1) * c, c);
			cp += now() - t1;
			dma += t1 - t0;
		}
		printf("dmastaging dir=d2h chunk=%zu bytes=%zu memcpy_s=%.6f memcpy_GBps=%.3f dma_s=%.6f\n", c, n, cp, n / cp / 1e9,
		       dma);
		// The same with the CPU having written the chunk (hot in its cache).
		cp = 0;
		for (size_t off = 0, k = 0; off < n; off += c, k++) {
			memset(pin + (k & 1) * c, 3, c);
			double t1 = now();
			memcpy(b + off, pin + (k & 1) * c, c);
			cp += now() - t1;
		}
		printf("cpustaging dir=d2h chunk=%zu bytes=%zu memcpy_s=%.6f memcpy_GBps=%.3f\n", c, n, cp, n / cp / 1e9);
		fflush(stdout);
	}
	CK(cudaFree(dev));
	CK(cudaFreeHost(pin));
	free(a);
	free(b);
}

// ntcopy copies n bytes with 32-byte non-temporal stores (both pointers
// 32-byte aligned, n a multiple of 128).
static void ntcopy(char *dst, const char *src, size_t n) {
	for (size_t i = 0; i < n; i += 128) {
		__m256i a = _mm256_load_si256((const __m256i *)(src + i));
		__m256i b = _mm256_load_si256((const __m256i *)(src + i + 32));
		__m256i c = _mm256_load_si256((const __m256i *)(src + i + 64));
		__m256i d = _mm256_load_si256((const __m256i *)(src + i + 96));
		_mm256_stream_si256((__m256i *)(dst + i), a);
		_mm256_stream_si256((__m256i *)(dst + i + 32), b);
		_mm256_stream_si256((__m256i *)(dst + i + 64), c);
		_mm256_stream_si256((__m256i *)(dst + i + 96), d);
	}
	_mm_sfence();
}

static void repmovsb(char *dst, const char *src, size_t n) {
	asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

// streamout: the copy-out of a staging ring (two 1 MiB halves of a pinned
// buffer, cache-resident) into 1 GiB of pageable memory, with
// non-temporal stores, rep movsb and glibc memcpy; and the NT copy of
// 1 GiB DRAM to DRAM.
static void streamout() {
	size_t big = 1024 * MiB, c = 1 * MiB;
	char *dst = (char *)aligned_alloc(4096, big), *src = (char *)aligned_alloc(4096, big), *ring;
	CK(cudaMallocHost((void **)&ring, 2 * c));
	touch(dst, big);
	touch(src, big);
	touch(ring, 2 * c);
	for (int r = 0; r < 3; r++) {
		span s;
		s.start();
		for (size_t off = 0, k = 0; off < big; off += c, k++) ntcopy(dst + off, ring + (k & 1) * c, c);
		s.stop("streamout", "how=nt chunk=%zu bytes=%zu rep=%d", c, big, r);
		s.start();
		for (size_t off = 0, k = 0; off < big; off += c, k++) repmovsb(dst + off, ring + (k & 1) * c, c);
		s.stop("streamout", "how=repmovsb chunk=%zu bytes=%zu rep=%d", c, big, r);
		s.start();
		for (size_t off = 0, k = 0; off < big; off += c, k++) memcpy(dst + off, ring + (k & 1) * c, c);
		s.stop("streamout", "how=memcpy chunk=%zu bytes=%zu rep=%d", c, big, r);
		s.start();
		ntcopy(dst, src, big);
		s.stop("streamout", "how=nt_dram_to_dram chunk=0 bytes=%zu rep=%d", big, r);
		s.start();
		memcpy(dst, src, big);
		s.stop("streamout", "how=memcpy_dram_to_dram chunk=0 bytes=%zu rep=%d", big, r);
	}
	CK(cudaFreeHost(ring));
	free(dst);
	free(src);
}

static void pageable() {
	size_t sizes[] = {64 << 10, 256 << 10, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB};
	size_t big = 1024 * MiB;
	char *h = (char *)malloc(big), *dev;
	touch(h, big);
	CK(cudaMalloc((void **)&dev, big));
	CK(cudaMemset(dev, 5, big));
	CK(cudaMemcpy(dev, h, big, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(h, dev, big, cudaMemcpyDeviceToHost));
	for (size_t n : sizes) {
		int reps = n >= 256 * MiB ? 3 : (int)(256 * MiB / n);
		if (reps > 200) reps = 200;
		for (int r = 0; r < 2; r++) {
			span s;
			s.start();
			for (int i = 0; i < reps; i++) CK(cudaMemcpy(dev, h, n, cudaMemcpyHostToDevice));
			s.stop("pageable", "dir=h2d bytes=%zu reps=%d rep=%d", n, reps, r);
			s.start();
			for (int i = 0; i < reps; i++) CK(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
			s.stop("pageable", "dir=d2h bytes=%zu reps=%d rep=%d", n, reps, r);
		}
	}
	// d2h into memory never touched: pages the copy itself must fault in.
	for (int r = 0; r < 2; r++) {
		size_t n = 256 * MiB;
		char *f = (char *)mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		span s;
		s.start();
		CK(cudaMemcpy(f, dev, n, cudaMemcpyDeviceToHost));
		s.stop("pageable", "dir=d2h_fresh bytes=%zu reps=1 rep=%d", n, r);
		munmap(f, n);
	}
	CK(cudaFree(dev));
	free(h);
}

static void prefetch(char *m, size_t n, bool gpu) {
#if CUDART_VERSION >= 13000
	cudaMemLocation loc;
	loc.type = gpu ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
	loc.id = 0;
	CK(cudaMemPrefetchAsync(m, n, loc, 0, 0));
#else
	CK(cudaMemPrefetchAsync(m, n, gpu ? 0 : cudaCpuDeviceId, 0));
#endif
	CK(cudaStreamSynchronize(0));
}

__global__ void readpages(const char *p, size_t n, size_t stride, int *out) {
	size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * stride;
	if (i < n && p[i] == 123) *out = 1;
}

static void managed() {
	size_t sizes[] = {2 * MiB, 16 * MiB, 64 * MiB, 256 * MiB};
	int *flag;
	CK(cudaMalloc((void **)&flag, 4));
	for (size_t n : sizes) {
		char *m;
		CK(cudaMallocManaged((void **)&m, n));
		for (int r = 0; r < 3; r++) {
			touch(m, n);
			prefetch(m, n, false);
			span s;
			s.start();
			prefetch(m, n, true);
			s.stop("prefetch", "dir=h2d bytes=%zu rep=%d", n, r);
			s.start();
			prefetch(m, n, false);
			s.stop("prefetch", "dir=d2h bytes=%zu rep=%d", n, r);
			// d2h of pages a kernel last read on the GPU, without the CPU
			// having touched them in between.
			prefetch(m, n, true);
			readpages<<<(n / 4096 + 255) / 256, 256>>>(m, n, 4096, flag);
			CK(cudaDeviceSynchronize());
			s.start();
			prefetch(m, n, false);
			s.stop("prefetch", "dir=d2h_after_kernel bytes=%zu rep=%d", n, r);
			// A second prefetch to the CPU of data already there.
			s.start();
			prefetch(m, n, false);
			s.stop("prefetch", "dir=d2h_resident bytes=%zu rep=%d", n, r);
		}
		// CPU fault-back at several strides: how many CPU faults, and what
		// each costs.
		size_t strides[] = {4096, 64 << 10, 2 * MiB};
		for (size_t st : strides) {
			for (int r = 0; r < 2; r++) {
				touch(m, n);
				prefetch(m, n, true);
				volatile char sink = 0;
				span s;
				s.start();
				for (size_t off = 0; off < n; off += st) sink += m[off];
				s.stop("cpufault", "bytes=%zu stride=%zu rep=%d", n, st, r);
			}
		}
		// GPU first touch of host-resident managed memory, one thread per
		// 4 KiB page: the fault path end to end.
		for (int r = 0; r < 2; r++) {
			touch(m, n);
			prefetch(m, n, false);
			span s;
			s.start();
			readpages<<<(n / 4096 + 255) / 256, 256>>>(m, n, 4096, flag);
			CK(cudaDeviceSynchronize());
			s.stop("gpufault", "bytes=%zu stride=4096 rep=%d", n, r);
		}
		CK(cudaFree(m));
	}
	CK(cudaFree(flag));
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "spin";
	const char *only = argc > 2 ? argv[2] : "all";
	if (!strcmp(mode, "blocking")) CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
	CK(cudaFree(0));
	printf("mode %s\n", mode);
	if (!strcmp(only, "streamout")) streamout();
	if (!strcmp(only, "all") || !strcmp(only, "memcpy")) memcpys();
	if (!strcmp(only, "all") || !strcmp(only, "pageable")) pageable();
	if (!strcmp(only, "all") || !strcmp(only, "managed")) managed();
	if (!strcmp(only, "d2h256")) {
		// For strace: four pageable d2h copies of 256 MiB and nothing else.
		size_t n = 256 * MiB;
		char *h = (char *)malloc(n), *dev;
		touch(h, n);
		CK(cudaMalloc((void **)&dev, n));
		for (int i = 0; i < 4; i++) CK(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost));
	}
	if (!strcmp(only, "h2d256")) {
		size_t n = 256 * MiB;
		char *h = (char *)malloc(n), *dev;
		touch(h, n);
		CK(cudaMalloc((void **)&dev, n));
		for (int i = 0; i < 4; i++) CK(cudaMemcpy(dev, h, n, cudaMemcpyHostToDevice));
	}
	return 0;
}
