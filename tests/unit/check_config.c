/* check_config.c — placeholder suite, filled in below. */
#include <check.h>

Suite *
config_suite(void)
{
	return suite_create("config");
}
