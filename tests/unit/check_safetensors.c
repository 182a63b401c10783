/* check_safetensors.c — placeholder suite, filled in below. */
#include <check.h>

Suite *
safetensors_suite(void)
{
	return suite_create("safetensors");
}
