// This file was generated with `cornucopia`. Do not modify.
