/* stbdump: the oracle for runtime/vision's decoder tests. It decodes one
 * image file with llama.cpp's vendored stb_image (3 requested channels, as
 * libmtmd does) and writes "W H\n" then the W*H*3 RGB bytes to stdout, or
 * "error: <reason>" to stderr with exit status 1. Build: just stbdump. */
#define STB_IMAGE_IMPLEMENTATION
#include "stb_image.h"
#include <stdio.h>

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: stbdump FILE\n");
		return 2;
	}
	int w, h, n;
	unsigned char *pix = stbi_load(argv[1], &w, &h, &n, 3);
	if (!pix) {
		fprintf(stderr, "error: %s\n", stbi_failure_reason());
		return 1;
	}
	printf("%d %d\n", w, h);
	fwrite(pix, 1, (size_t)w * h * 3, stdout);
	stbi_image_free(pix);
	return 0;
}
